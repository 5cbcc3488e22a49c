#include "levers/data/text_corpus.hpp"

#include "levers/core/error.hpp"
#include "levers/data/byte_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "levers/data/mapped_file.hpp"

#include <cstring>
#include <fstream>

namespace levers::data {

namespace fs = std::filesystem;

TokenFile::TokenFile(std::shared_ptr<const void> owner, const void* data, std::int64_t size, int width)
    : owner_(std::move(owner)), data_(data), size_(size), width_(width) {
    LEVERS_CHECK(width == 1 || width == 4, "tokens are 1 or 4 bytes wide, not {}", width);
}

TokenFile TokenFile::from(std::vector<std::int32_t> tokens) {
    auto owned = std::make_shared<std::vector<std::int32_t>>(std::move(tokens));
    return TokenFile(owned, owned->data(), static_cast<std::int64_t>(owned->size()), 4);
}

void TokenFile::copy(std::int64_t start, std::int64_t n, std::int32_t* out) const {
    LEVERS_CHECK(start >= 0 && n >= 0 && start + n <= size_, "tokens [{}, {}) of {}", start, start + n, size_);
    if (width_ == 4) {
        std::memcpy(out, static_cast<const std::int32_t*>(data_) + start, static_cast<std::size_t>(n) * 4);
        return;
    }
    const auto* bytes = static_cast<const std::uint8_t*>(data_) + start;
    for (std::int64_t i = 0; i < n; ++i) out[i] = bytes[i];
}

std::vector<std::int32_t> TokenFile::to_vector() const {
    std::vector<std::int32_t> out(static_cast<std::size_t>(size_));
    copy(0, size_, out.data());
    return out;
}

namespace {

// The cache file: u64 train count, u64 validation count, u64 width, then the tokens.
struct Header {
    std::uint64_t train = 0, validation = 0, width = 0;
};

void write_corpus(const fs::path& out, const std::vector<fs::path>& files, double validation_fraction,
                  const std::function<std::vector<std::int32_t>(const std::string&)>& encode, int width) {
    std::vector<std::int32_t> train, validation;
    for (const auto& path : files) {
        std::string text = read_data_file(path);
        LEVERS_CHECK(!text.empty(), "{}: empty file, expected text", path.string());
        auto nul = text.find('\0');
        LEVERS_CHECK(nul == std::string::npos, "{}: has a NUL byte at offset {}; expected plain text", path.string(),
                     nul);
        auto tokens = encode(text);
        auto split = static_cast<std::ptrdiff_t>(static_cast<double>(tokens.size()) * (1 - validation_fraction));
        train.insert(train.end(), tokens.begin(), tokens.begin() + split);
        validation.insert(validation.end(), tokens.begin() + split, tokens.end());
    }
    std::ofstream f(out, std::ios::binary);
    const Header h{train.size(), validation.size(), static_cast<std::uint64_t>(width)};
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    for (const auto* part : {&train, &validation}) {
        if (width == 4) {
            f.write(reinterpret_cast<const char*>(part->data()), static_cast<std::streamsize>(part->size() * 4));
        } else {
            std::vector<std::uint8_t> bytes(part->begin(), part->end());
            f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        }
    }
    LEVERS_CHECK(f.good(), "{}: cannot be written", out.string());
}

TextCorpus load(const fs::path& dir_or_file, double validation_fraction,
                const std::function<std::vector<std::int32_t>(const std::string&)>& encode,
                const std::string& tokenizer, int width) {
    LEVERS_CHECK(validation_fraction > 0 && validation_fraction < 1,
                 "validation fraction must be in (0, 1), got {}", validation_fraction);
    std::vector<fs::path> files;
    if (fs::is_directory(dir_or_file))
        files = list_files(dir_or_file, ".txt");
    else
        files = {dir_or_file};
    std::string key = fmt::format("{}|{}|{}", tokenizer, validation_fraction, width);
    for (const auto& f : files) {
        if (!fs::exists(f)) (void)read_data_file(f);  // a missing file is named with how to install the data
        key += '|';
        key += file_signature(f);
    }
    const MappedFile mapped = MappedFile::open(
        cached_file(fmt::format("corpus-{:016x}.tokens", std::hash<std::string>{}(key)),
                    [&](const fs::path& out) { write_corpus(out, files, validation_fraction, encode, width); }));
    Header h;
    LEVERS_CHECK(mapped.size() >= sizeof h, "{}: a cached corpus shorter than its header", dir_or_file.string());
    std::memcpy(&h, mapped.data(), sizeof h);
    LEVERS_CHECK(h.width == static_cast<std::uint64_t>(width) && sizeof h + (h.train + h.validation) * h.width == mapped.size(),
                 "the cached corpus of {} is damaged; delete {} and run again", dir_or_file.string(),
                 cache_dir().string());
    const std::byte* tokens = mapped.data() + sizeof h;
    TextCorpus c;
    c.train = TokenFile(mapped.memory(), tokens, static_cast<std::int64_t>(h.train), width);
    c.validation = TokenFile(mapped.memory(), tokens + h.train * h.width, static_cast<std::int64_t>(h.validation), width);
    return c;
}

}  // namespace

TextCorpus load_byte_corpus(const fs::path& dir_or_file, double validation_fraction) {
    return load(dir_or_file, validation_fraction, [](const std::string& text) { return ByteTokenizer::encode(text); },
                "bytes", 1);
}

TextCorpus load_text_corpus(const fs::path& dir_or_file, double validation_fraction,
                            const std::function<std::vector<std::int32_t>(const std::string&)>& encode,
                            const std::string& tokenizer) {
    return load(dir_or_file, validation_fraction, encode, tokenizer, 4);
}

std::int64_t window_starts(const TokenFile& tokens, std::int64_t time) {
    const std::int64_t n = tokens.size();
    LEVERS_CHECK(n > time + 1, "a corpus of {} tokens is too short for windows of {} tokens", n, time + 1);
    return n - time - 1;
}

TokenBatch windows_at(const TokenFile& tokens, const std::vector<std::int64_t>& starts, std::int64_t time) {
    const auto batch = static_cast<std::int64_t>(starts.size());
    TokenBatch b{Tensor::empty({batch, time}, DType::i32), Tensor::empty({batch, time}, DType::i32), batch, time};
    std::int32_t* in = b.inputs.data<std::int32_t>();
    std::int32_t* out = b.targets.data<std::int32_t>();
    for (std::int64_t r = 0; r < batch; ++r) {
        const std::int64_t start = starts[static_cast<std::size_t>(r)];
        tokens.copy(start, time, in + r * time);
        tokens.copy(start + 1, time, out + r * time);
    }
    return b;
}

TokenBatch random_batch(const TokenFile& tokens, std::int64_t batch, std::int64_t time, Rng& rng) {
    const std::int64_t starts = window_starts(tokens, time);
    std::vector<std::int64_t> at(static_cast<std::size_t>(batch));
    for (auto& s : at) s = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(starts)));
    return windows_at(tokens, at, time);
}

bool sequential_batch(const TokenFile& tokens, std::int64_t batch, std::int64_t time, std::int64_t index,
                      TokenBatch& out, std::int64_t stride) {
    LEVERS_CHECK(stride >= 1, "window stride must be >= 1, got {}", stride);
    const std::int64_t last_window = (index + 1) * batch - 1;
    if (last_window * stride * time + time + 1 > tokens.size()) return false;
    std::vector<std::int64_t> at(static_cast<std::size_t>(batch));
    for (std::int64_t r = 0; r < batch; ++r) at[static_cast<std::size_t>(r)] = (index * batch + r) * stride * time;
    out = windows_at(tokens, at, time);
    return true;
}

}  // namespace levers::data

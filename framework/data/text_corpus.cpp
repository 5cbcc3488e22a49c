#include "framework/data/text_corpus.hpp"

#include "framework/core/error.hpp"
#include "framework/data/byte_tokenizer.hpp"
#include "framework/data/files.hpp"

namespace levers::data {

TextCorpus load_byte_corpus(const std::filesystem::path& dir_or_file, double validation_fraction) {
    return load_text_corpus(dir_or_file, validation_fraction,
                            [](const std::string& text) { return ByteTokenizer::encode(text); });
}

TextCorpus load_text_corpus(const std::filesystem::path& dir_or_file, double validation_fraction,
                            const std::function<std::vector<std::int32_t>(const std::string&)>& encode) {
    LEVERS_CHECK(validation_fraction > 0 && validation_fraction < 1,
                 "validation fraction must be in (0, 1), got {}", validation_fraction);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(dir_or_file))
        files = list_files(dir_or_file, ".txt");
    else
        files = {dir_or_file};
    TextCorpus corpus;
    for (const auto& path : files) {
        std::string text = read_data_file(path);
        LEVERS_CHECK(!text.empty(), "{}: empty file, expected text", path.string());
        auto nul = text.find('\0');
        LEVERS_CHECK(nul == std::string::npos, "{}: has a NUL byte at offset {}; expected plain text", path.string(),
                     nul);
        auto tokens = encode(text);
        auto split = static_cast<std::ptrdiff_t>(static_cast<double>(tokens.size()) * (1 - validation_fraction));
        corpus.train.insert(corpus.train.end(), tokens.begin(), tokens.begin() + split);
        corpus.validation.insert(corpus.validation.end(), tokens.begin() + split, tokens.end());
    }
    return corpus;
}

TokenBatch random_batch(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time, Rng& rng) {
    const auto n = static_cast<std::int64_t>(tokens.size());
    LEVERS_CHECK(n > time + 1, "a corpus of {} tokens is too short for windows of {} tokens", n, time + 1);
    TokenBatch b{std::vector<std::int32_t>(static_cast<std::size_t>(batch * time)),
                 std::vector<std::int32_t>(static_cast<std::size_t>(batch * time)), batch, time};
    for (std::int64_t r = 0; r < batch; ++r) {
        auto start = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n - time - 1)));
        for (std::int64_t t = 0; t < time; ++t) {
            b.inputs[static_cast<std::size_t>(r * time + t)] = tokens[static_cast<std::size_t>(start + t)];
            b.targets[static_cast<std::size_t>(r * time + t)] = tokens[static_cast<std::size_t>(start + t + 1)];
        }
    }
    return b;
}

bool sequential_batch(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time,
                      std::int64_t index, TokenBatch& out, std::int64_t stride) {
    LEVERS_CHECK(stride >= 1, "window stride must be >= 1, got {}", stride);
    const auto n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t last_window = (index + 1) * batch - 1;
    if (last_window * stride * time + time + 1 > n) return false;
    out = {std::vector<std::int32_t>(static_cast<std::size_t>(batch * time)),
           std::vector<std::int32_t>(static_cast<std::size_t>(batch * time)), batch, time};
    for (std::int64_t r = 0; r < batch; ++r) {
        const std::int64_t start = (index * batch + r) * stride * time;
        for (std::int64_t t = 0; t < time; ++t) {
            out.inputs[static_cast<std::size_t>(r * time + t)] = tokens[static_cast<std::size_t>(start + t)];
            out.targets[static_cast<std::size_t>(r * time + t)] = tokens[static_cast<std::size_t>(start + t + 1)];
        }
    }
    return true;
}

}  // namespace levers::data

#include "levers/models/gpt_files.hpp"

#include "levers/core/error.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/byte_tokenizer.hpp"
#include "levers/models/gpt2_weights.hpp"
#include "levers/models/gpt_io.hpp"

#include <array>
#include <cstring>
#include <fstream>

namespace levers::models {

namespace fs = std::filesystem;

WeightsFormat weights_format(const fs::path& path, const std::string& what) {
    constexpr const char* kAccepted = "a levers checkpoint (model.ckpt from pretrain or fine_tune) or GPT-2 weights in "
                                      "safetensors";
    LEVERS_CHECK(fs::is_regular_file(path), "{}{}: no such file; give {}", what, path.string(), kAccepted);
    std::ifstream in(path, std::ios::binary);
    std::array<char, 9> head{};
    in.read(head.data(), head.size());
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got >= 8 && std::memcmp(head.data(), "LEVERSCK", 8) == 0) return WeightsFormat::levers_checkpoint;
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, head.data(), sizeof header_len);  // little-endian, as safetensors writes it
    if (got == head.size() && head[8] == '{' && header_len + 8 <= fs::file_size(path)) return WeightsFormat::safetensors;
    LEVERS_FAIL("{}{}: neither a levers checkpoint nor safetensors; give {}", what, path.string(), kAccepted);
}

std::unique_ptr<Gpt> load_any_gpt(const fs::path& path, int n_head) {
    if (weights_format(path) == WeightsFormat::safetensors) return load_gpt2_safetensors(path, n_head);
    return load_gpt(path);
}

void save_any_gpt(const fs::path& path, Gpt& model) {
    if (path.extension() == ".safetensors")
        save_gpt2_safetensors(path, model);
    else
        save_gpt(path, model);
}

TextCodec codec_for(Gpt& model, const fs::path& weights) {
    return codec_for_vocab(model.config().vocab_size, weights);
}

TextCodec codec_for_vocab(int vocab, const fs::path& weights) {
    if (vocab == data::ByteTokenizer::kVocabSize)
        return {[](const std::string& t) { return data::ByteTokenizer::encode(t); },
                [](const std::vector<std::int32_t>& t) { return data::ByteTokenizer::decode(t); }, "bytes"};
    const fs::path dir = weights.parent_path();
    const bool beside = fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt");
    auto bpe = std::make_shared<data::BpeTokenizer>(beside ? data::BpeTokenizer::from_files(dir / "vocab.json",
                                                                                          dir / "merges.txt")
                                                           : data::BpeTokenizer::gpt2_default());
    LEVERS_CHECK(vocab == bpe->vocab_size(), "{}: a vocabulary of {} matches neither bytes (256) nor GPT-2's BPE ({})",
                 weights.string(), vocab, bpe->vocab_size());
    return {[bpe](const std::string& t) { return bpe->encode(t); },
            [bpe](const std::vector<std::int32_t>& t) { return bpe->decode(t); },
            beside ? "GPT-2 BPE (vocab.json, merges.txt beside the weights)" : "GPT-2 BPE (the installed files)"};
}

}  // namespace levers::models

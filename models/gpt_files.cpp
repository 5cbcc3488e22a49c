#include "models/gpt_files.hpp"

#include "framework/core/error.hpp"
#include "framework/data/bpe_tokenizer.hpp"
#include "framework/data/byte_tokenizer.hpp"
#include "models/gpt2_weights.hpp"
#include "models/gpt_io.hpp"

namespace levers::models {

namespace fs = std::filesystem;

std::unique_ptr<Gpt> load_any_gpt(const fs::path& path, int n_head) {
    LEVERS_CHECK(fs::exists(path), "{}: no such file", path.string());
    if (path.extension() == ".safetensors") return load_gpt2_safetensors(path, n_head);
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

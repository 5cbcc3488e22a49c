// The tests' one tiny Llama: a config small enough to train or score in a
// moment (its sizes changed where a test needs others), and a directory of
// it saved as transformers saves one, beside a tokenizer (by default the
// tests' own small one with a chat template, tests/fixtures/tiny_tokenizer).
#pragma once

#include "levers/models/hf_dir.hpp"
#include "levers/models/llama.hpp"
#include "levers/models/llama_config.hpp"
#include "tests/source_tree.hpp"

#include <cstdint>
#include <filesystem>

namespace levers::testing {

struct TinyLlama {
    std::int64_t vocab = 40, hidden = 32, intermediate = 48, layers = 2, heads = 4, kv_heads = 2, context = 64;
    bool tied = true;  // the output projection is the embeddings'
};

inline models::LlamaConfig tiny_llama(const TinyLlama& t = {}) {
    models::LlamaConfig c;
    c.vocab_size = t.vocab;
    c.hidden_size = t.hidden;
    c.intermediate_size = t.intermediate;
    c.num_hidden_layers = t.layers;
    c.num_attention_heads = t.heads;
    c.num_key_value_heads = t.kv_heads;
    c.max_position_embeddings = t.context;
    c.tie_word_embeddings = t.tied;
    return c;
}

// A small byte-level BPE tokenizer (517 tokens) with Llama 3's kind of special tokens and a chat template.
inline std::filesystem::path tiny_tokenizer_dir() { return source_path("tests/fixtures/tiny_tokenizer"); }
constexpr std::int64_t kTinyTokenizerVocab = 517;

// A Llama of `config` (seeded) saved into `dir` with the tokenizer files of `tokenizer`; returns `dir`.
inline std::filesystem::path save_tiny_llama(const std::filesystem::path& dir, const models::LlamaConfig& config,
                                             std::uint64_t seed,
                                             const std::filesystem::path& tokenizer = tiny_tokenizer_dir()) {
    models::Llama model(config, seed);
    models::save_hf_model(dir, model, {.tokenizer_from = tokenizer});
    return dir;
}

}  // namespace levers::testing

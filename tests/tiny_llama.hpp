// The tests' one tiny Llama: a config small enough to train or score in a
// moment (its sizes changed where a test needs others), and a directory of
// it saved as transformers saves one, beside a tokenizer (by default the
// tests' own small one with a chat template, tests/fixtures/tiny_tokenizer).
#pragma once

#include "levers/models/hf_dir.hpp"
#include "levers/models/llama.hpp"
#include "levers/models/llama_config.hpp"
#include "tests/source_tree.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

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

// The tiny config as a model of `model_type`, read back through config.json's
// parser so that the family's own settings apply (Gemma's norms, GeGLU and
// scaling), with what makes the family differ switched on at this size:
// smollm3 a layer without rotary embeddings; gemma2 a sliding layer of 4 keys
// and soft caps that bite; gemma3_text a sliding layer, linear rope scaling on
// the global one and heads of 64 (bf16's fused attention on GPUs); phi3 its
// fused projections, three quarters of each head turning, longrope whose long
// factors take over past half the context, and a window of 6 keys; mixtral
// and qwen3_moe their experts and the load-balancing loss.
inline models::LlamaConfig tiny_of_type(const std::string& model_type, const TinyLlama& t = {}) {
    nlohmann::json j = tiny_llama(t).to_json();
    j["model_type"] = model_type;
    std::vector<std::string> types;
    for (std::int64_t i = 0; i < t.layers; ++i) types.emplace_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    if (model_type == "smollm3") {
        std::vector<int> rope;
        for (std::int64_t i = 0; i < t.layers; ++i) rope.push_back(i % 2 == 0 ? 1 : 0);
        j["no_rope_layers"] = rope;
    }
    if (model_type == "gemma2") {
        j.erase("hidden_act");
        j.update({{"sliding_window", 4}, {"layer_types", types}, {"query_pre_attn_scalar", 16},
                  {"attn_logit_softcapping", 2.0}, {"final_logit_softcapping", 3.0}});
    }
    if (model_type == "gemma3_text") {
        j.erase("hidden_act");
        j.update({{"sliding_window", 4}, {"layer_types", types}, {"head_dim", 64}, {"query_pre_attn_scalar", 48},
                  {"rope_theta", 1e6}, {"rope_local_base_freq", 1e4},
                  {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}});
    }
    if (model_type == "phi3") {
        const std::int64_t head = t.hidden / t.heads, turning = head % 8 == 0 ? head * 3 / 4 : head;
        std::vector<double> short_factor, long_factor;
        for (std::int64_t i = 0; i < turning / 2; ++i) {
            short_factor.push_back(1 + 0.5 * static_cast<double>(i));
            long_factor.push_back(2 + 2 * static_cast<double>(i));
        }
        j.update({{"partial_rotary_factor", static_cast<double>(turning) / static_cast<double>(head)},
                  {"sliding_window", 6}, {"original_max_position_embeddings", t.context / 2},
                  {"rope_scaling", {{"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}}}});
    }
    if (model_type == "mixtral")  // 4 experts of the MLP's width, the load-balancing loss on
        j.update({{"num_local_experts", 4}, {"num_experts_per_tok", 2}, {"output_router_logits", true},
                  {"router_aux_loss_coef", 0.02}});
    if (model_type == "qwen3_moe")  // 4 experts of half its width, renormalised, the last layer dense
        j.update({{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", t.intermediate / 2},
                  {"norm_topk_prob", true}, {"mlp_only_layers", {t.layers - 1}}, {"output_router_logits", true},
                  {"router_aux_loss_coef", 0.02}});
    return models::parse_llama_config(j, model_type);
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

// The post-training tests' model: one layer of 16 over the tokenizer above, with its chat template, in `dir`.
inline std::filesystem::path save_tiny_chat_llama(const std::filesystem::path& dir, std::int64_t context,
                                                  std::uint64_t seed) {
    return save_tiny_llama(dir,
                           tiny_llama({.vocab = kTinyTokenizerVocab, .hidden = 16, .intermediate = 32, .layers = 1,
                                       .heads = 2, .kv_heads = 1, .context = context}),
                           seed);
}

}  // namespace levers::testing

// The Llama shape the benchmarks share (bench/llama_step.sh, bench/generate.sh):
// 8 layers x 512, 8 query heads of 64 over 2 key-value heads, MLP 1376
// (Llama's 8/3, a multiple of 32), vocabulary 32,000.
#pragma once

#include "levers/models/llama_config.hpp"

namespace levers::bench {

inline models::LlamaConfig llama_shape(std::int64_t context) {
    models::LlamaConfig c;
    c.vocab_size = 32000;
    c.hidden_size = 512;
    c.intermediate_size = 1376;
    c.num_hidden_layers = 8;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = context;
    return c;
}

}  // namespace levers::bench

// Attention modules. CausalSelfAttention is GPT-2's: c_attn makes q, k and v
// from x [B, T, C] in one product, each head attends to the positions before
// it, c_proj mixes the heads; it runs the fused kernel
// (levers/kernels/flash_attention.hpp) where it applies, the packed op elsewhere.
// Attention is the general one (Llama's, Mistral's, Qwen's, Phi-3's): q, k
// and v projections (separate, or one qkv_proj as Phi-3 stores them), fewer
// key-value heads than query heads (grouped-query attention), rotary
// embeddings, a mask, causal or not; written from matmul and softmax
// (ops::attention_written_out), it takes the fused kernel
// (levers/kernels/causal_attention.hpp) where it applies.
#pragma once

#include "levers/nn/layers.hpp"
#include "levers/nn/rotary.hpp"

#include <memory>
#include <optional>
#include <utility>

namespace levers::nn {

class CausalSelfAttention : public Layer {
public:
    CausalSelfAttention(std::int64_t channels, std::int64_t heads, Init proj_init = init::fan_in_uniform(),
                        Init qkv_init = init::fan_in_uniform());
    CausalSelfAttention(Module& parent, std::string name, std::int64_t channels, std::int64_t heads,
                        Init proj_init = init::fan_in_uniform(), Init qkv_init = init::fan_in_uniform());
    Tensor forward(const Tensor& x) override;

    Linear c_attn, c_proj;
    std::int64_t heads;
};

// The keys and values of the positions an Attention has seen, so generation
// runs the prompt once and then one position per step. Made empty; the
// first call sizes it for `capacity` positions.
struct KvCache {
    explicit KvCache(std::int64_t capacity) : capacity(capacity) {}
    std::int64_t capacity;
    std::int64_t length = 0;  // positions held
    Tensor keys, values;      // [B, capacity, kv_heads, D]

    // Adds keys and values [B, T, kv_heads, D] at positions length, ...;
    // returns every position's held (views [B, length, kv_heads, D]). Under
    // autograd::InferenceMode only; throws levers::Error past the capacity.
    std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v);
    // Keeps the batch rows `rows` (i32, in that order) and drops the others: finished sequences.
    void keep_rows(const Tensor& rows);
};

class Attention : public Layer {
public:
    struct Options {
        std::int64_t kv_heads = 0;  // 0: as many as the query heads
        std::int64_t head_dim = 0;  // 0: dim / heads
        bool bias = false;          // on q, k and v (Qwen 2's); o_proj has none
        bool causal = true;
        double rope_theta = 0;      // > 0: rotary embeddings on q and k with this base
        std::optional<RopeScaling> rope_scaling;  // with rope_theta: rescaled frequencies (Llama 3.1's, Gemma 3's)
        std::int64_t rotary_dim = 0;  // with rope_theta: the elements of a head that rotate (0: all; Phi-4-mini's part)
        bool fused_qkv = false;       // one projection qkv_proj making q, k and v side by side (Phi-3's)
        double qk_norm_eps = 0;     // > 0: RMSNorm of each head's q and k before rotation (Qwen 3's q_norm, k_norm)
        double qk_norm_offset = 0;  // the q/k norms' weight offset (RMSNorm's: Gemma 3's are 1 + weight)
        std::int64_t sliding_window = 0;  // > 0 (causal only): a query sees this many keys, itself included (Mistral)
        double scale = 0;           // > 0: the scores' scale (Gemma's query_pre_attn_scalar^-1/2); 0: 1/sqrt(head_dim)
        double logit_softcap = 0;   // > 0: scores become cap · tanh(scores / cap) before the mask (Gemma 2's)
        Init init = init::fan_in_uniform();  // of the four projections' weights
    };
    Attention(std::int64_t dim, std::int64_t heads, Options options);
    Attention(Module& parent, std::string name, std::int64_t dim, std::int64_t heads, Options options);
    // x [B, T, dim] to [B, T, dim], positions from 0.
    Tensor forward(const Tensor& x) override;
    // With a mask, bool, broadcast to [B, heads, T, T]: true where a query
    // may attend to a key (on top of causality, when causal).
    Tensor forward(const Tensor& x, const Tensor& mask);
    // Generation (under autograd::InferenceMode): x [B, T, dim] at positions
    // cache.length, cache.length + 1, ...; its keys and values are added to
    // the cache and the queries attend to every position held.
    Tensor forward(const Tensor& x, KvCache& cache);
    // The same with `starts` (i32 [B, T]): the first position each query
    // sees (rows of different lengths generated together, their left padding
    // unseen; causal only).
    Tensor forward(const Tensor& x, KvCache& cache, const Tensor& starts);
    // Packed sequences: `documents` (i32 [B, T], non-decreasing along each
    // row) numbers the document of each position; a query attends only to
    // keys of its own document, and rotary positions restart at each
    // document's first token, so a row of packed documents computes what
    // each document would alone.
    Tensor forward_packed(const Tensor& x, const Tensor& documents);

    // q_proj, k_proj and v_proj, or qkv_proj alone (fused_qkv); registered in that order, then o_proj.
    std::unique_ptr<Linear> q_proj, k_proj, v_proj, qkv_proj;
    Linear o_proj;
    std::unique_ptr<RMSNorm> q_norm, k_norm;  // when qk_norm_eps > 0
    std::unique_ptr<RotaryEmbedding> rotary;  // when rope_theta > 0
    const std::int64_t heads, kv_heads, head_dim, sliding_window;
    const bool causal;
    // q's factor making the kernels' 1/sqrt(head_dim) the scale asked (1: none), and the scores' soft cap.
    const double query_factor, logit_softcap;

    // Packed rows: each position's rotary position (on the host) and its document's first position (on x's device).
    struct Packed {
        Tensor positions, starts;
    };

private:
    struct Checked {};  // the options have their defaults filled in and are valid
    Attention(std::int64_t dim, std::int64_t heads, Options options, Checked);
    struct Heads {
        Tensor q, k, v;  // [B, T, heads or kv_heads, D]
    };
    // The projections, q and k normed and rotated, from position `start` or the packed rows' positions.
    Heads project(const Tensor& x, std::int64_t start, const Packed* packed);
    // The heads attending, by the kernel that applies: [B, T, heads x D].
    // `starts`: the first key each query sees (packed rows', or a padded batch's), else none.
    Tensor mix(const Heads& h, const Tensor* mask, bool cached, const Tensor* starts);
    Tensor attend(const Tensor& x, const Tensor* mask, KvCache* cache, const Packed* packed = nullptr,
                  const Tensor* starts = nullptr);
};

}  // namespace levers::nn

// Causal attention with grouped-query heads, fused (the Llama family's):
// y = softmax(q kᵀ / √D + mask) v without the [T, T] matrices of the
// written-out form. q [B, T, H, D], k and v [B, S, KVH, D] (S ≥ T: the
// queries are the last T positions, as when keys come from a KV cache), query
// head h reading key-value head h / (H / KVH). A query at position p sees the
// keys from its lowest(p) to p: 0 with no mask; the start of its document for
// packed rows (`starts`, i32 [B, T], non-decreasing along each row); and no
// further back than `window` keys, itself included (Mistral's sliding window).
// Forward keeps each query row's log-sum-exp (lse [B, H, T], in the
// accumulator dtype); backward recomputes the probabilities from it, a tile of
// queries at a time. The rows of q, k and v may lie apart (a KV cache's
// prefix, GPT-2's packed qkv): each position's heads must be contiguous.
// The CPU has it in f32 and f64 for any head size; GPUs in bf16 for head
// sizes 64 and 128 (tensor cores). ops::attention_written_out is the same
// function from matmul and softmax: the reference, and the path everywhere else.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <cstdint>

namespace levers {

// "causal_attention": y and lse from q, k, v (and starts, when given).
struct CausalAttentionCall : KernelCallBase {
    static constexpr const char* kName = "causal_attention";
    TensorArg y, lse, q, k, v, starts;
    std::int64_t window = 0;
};
// "causal_attention_backward": d_q, d_k and d_v, all written.
struct CausalAttentionBackwardCall : KernelCallBase {
    static constexpr const char* kName = "causal_attention_backward";
    TensorArg d_q, d_k, d_v, d_y, y, lse, q, k, v, starts;
    std::int64_t window = 0;
};

}  // namespace levers

namespace levers::kernels {

// Where one problem's rows lie (element strides) and which keys each query sees.
struct CausalProblem {
    index_t batch = 0, time = 0, keys = 0, heads = 0, kv_heads = 0, head_dim = 0;
    index_t q_batch = 0, q_row = 0, k_batch = 0, k_row = 0, v_batch = 0, v_row = 0;
    index_t window = 0;                   // 0: no window
    const std::int32_t* starts = nullptr;  // [batch, time], contiguous; null: every key from 0

    LEVERS_HD index_t group() const { return heads / kv_heads; }
    // Query t's position among the keys.
    LEVERS_HD index_t position(index_t t) const { return keys - time + t; }
    // The first key query t of batch row b sees (its last is position(t)).
    LEVERS_HD index_t lowest(index_t b, index_t t) const {
        index_t low = starts ? static_cast<index_t>(starts[b * time + t]) : 0;
        if (window > 0 && position(t) - window + 1 > low) low = position(t) - window + 1;
        return low;
    }
};

// The problem a call describes (shapes and strides checked by the op).
inline CausalProblem causal_problem(const TensorArg& q, const TensorArg& k, const TensorArg& v,
                                    const TensorArg& starts, std::int64_t window) {
    CausalProblem p;
    p.batch = q.shape[0];
    p.time = q.shape[1];
    p.heads = q.shape[2];
    p.head_dim = q.shape[3];
    p.keys = k.shape[1];
    p.kv_heads = k.shape[2];
    p.q_batch = q.strides[0];
    p.q_row = q.strides[1];
    p.k_batch = k.strides[0];
    p.k_row = k.strides[1];
    p.v_batch = v.strides[0];
    p.v_row = v.strides[1];
    p.window = window;
    p.starts = starts.defined() ? starts.as<const std::int32_t>() : nullptr;
    return p;
}

}  // namespace levers::kernels

#if !defined(__CUDACC__)
#include "levers/core/tensor.hpp"

namespace levers::ops {

// Which keys a query sees besides causality (see the top of this file).
struct CausalMask {
    Tensor starts;            // i32 [B, T]: the first key each query sees; undefined: 0
    std::int64_t window = 0;  // > 0: at most this many keys back, the query's own included
};

// Whether LEVERS_FUSED_ATTENTION=0 asks for the written-out attention
// (this op's and GPT-2's flash_attention alike).
bool fused_attention_turned_off();

// Whether the fused kernel runs for this dtype and head size where `device`
// is: a backend has it (GPUs: head sizes 64 and 128), and
// LEVERS_FUSED_ATTENTION=0 does not ask for the written-out form.
bool causal_attention_applies(Device device, DType dtype, std::int64_t head_dim);

// The fused causal attention of q [B, T, H, D] over k, v [B, S, KVH, D]:
// y [B, T, H, D]; differentiable in q, k and v.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const CausalMask& mask = {});

// The same function from general ops (scores [B, H, T, S], masked_fill,
// softmax, matmul), with two more choices: `causal` false lets every query see
// every key (the mask's window then must be 0), and `mask` (bool, broadcast to
// [B, H, T, S]) is true where a query may attend to a key, on top.
// `softcap` > 0 bounds the scores to (-softcap, softcap) as Gemma 2 does,
// softcap · tanh(scores / softcap), before the masks.
Tensor attention_written_out(const Tensor& q, const Tensor& k, const Tensor& v, const CausalMask& causal_mask,
                             bool causal = true, const Tensor* mask = nullptr, double softcap = 0);

}  // namespace levers::ops
#endif  // !__CUDACC__

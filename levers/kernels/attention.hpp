// Causal multi-head self-attention on a fused qkv input (GPT-2's c_attn output).
//
// qkv[B, T, 3C] holds q | k | v along the last axis; head h uses channels
// [h·D, (h+1)·D) of each, D = C / H. y[B, T, C] = softmax(q kᵀ / √D, causal) v,
// heads side by side. The probabilities att[B, H, T, T] are saved for backward
// (entries above the diagonal are zero). Conventions as in gelu.hpp. The
// kernels read contiguous memory: the op makes its input so.
// (flash_attention.hpp is the fused kernel that keeps no [T, T] matrix;
// nn::Attention writes attention of any heads and masks from general ops.)
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <cmath>

namespace levers {

// "attention": y [B, T, C] and att [B, H, T, T] from qkv [B, T, 3C].
struct AttentionCall : KernelCallBase {
    static constexpr const char* kName = "attention";
    TensorArg y, att, qkv;
    std::int64_t heads = 1;
};
// "attention_backward": d_qkv (written).
struct AttentionBackwardCall : KernelCallBase {
    static constexpr const char* kName = "attention_backward";
    TensorArg d_qkv, d_y, att, qkv;
    std::int64_t heads = 1;
};

}  // namespace levers

namespace levers::kernels {

// Turns scores p[0..=i] into probabilities in place and zeroes p[i+1..len).
template <class T> LEVERS_HD void causal_softmax_row(T* p, index_t i, index_t len) {
    T m = p[0];
    for (index_t j = 1; j <= i; ++j) m = p[j] > m ? p[j] : m;
    T s = 0;
    for (index_t j = 0; j <= i; ++j) {
        p[j] = std::exp(p[j] - m);
        s += p[j];
    }
    T inv = T(1) / s;
    for (index_t j = 0; j <= i; ++j) p[j] *= inv;
    for (index_t j = i + 1; j < len; ++j) p[j] = 0;
}

// Softmax backward for one row: d_s[j] = p[j] · (d_p[j] - Σ_k p[k] d_p[k]).
// d_s may alias d_p.
template <class T> LEVERS_HD void softmax_row_backward(T* d_s, const T* p, const T* d_p, index_t len) {
    T dot = 0;
    for (index_t j = 0; j < len; ++j) dot += p[j] * d_p[j];
    for (index_t j = 0; j < len; ++j) d_s[j] = p[j] * (d_p[j] - dot);
}

namespace cpu {

template <class T>
void attention_forward(T* y, T* att, const T* qkv, index_t batch, index_t time, index_t channels, index_t heads);

// d_qkv written (all of q, k and v parts).
template <class T>
void attention_backward(T* d_qkv, const T* d_y, const T* att, const T* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads);

}  // namespace cpu
}  // namespace levers::kernels

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Checks qkv [B, T, 3C] for `heads` heads; returns C.
inline std::int64_t attention_channels(const char* op, const Tensor& qkv, std::int64_t heads) {
    check_float(op, "qkv", qkv);
    LEVERS_CHECK(qkv.shape().ndim() == 3 && qkv.dim(2) % 3 == 0,
                 "{}: 'qkv' is {}, expected [batch, time, 3 x channels] (q, k and v side by side)", op,
                 describe(qkv));
    const std::int64_t channels = qkv.dim(2) / 3;
    LEVERS_CHECK(heads >= 1 && channels % heads == 0, "{}: {} channels do not split into {} heads", op, channels,
                 heads);
    return channels;
}

// Causal self-attention of qkv [B, T, 3C] over `heads` heads: y [B, T, C]; differentiable.
inline Tensor attention(const Tensor& qkv_in, std::int64_t heads) {
    const Tensor qkv = dense(qkv_in);
    const std::int64_t channels = attention_channels("attention", qkv, heads);
    const std::int64_t batch = qkv.dim(0), time = qkv.dim(1);
    Tensor y = Tensor::empty({batch, time, channels}, qkv.dtype(), qkv.device());
    Tensor att = Tensor::empty({batch, heads, time, time}, qkv.dtype(), qkv.device());
    AttentionCall call{.y = arg(y), .att = arg(att), .qkv = arg(qkv), .heads = heads};
    run(qkv, call);
    struct Saved {
        autograd::SavedTensor qkv, att;
        std::int64_t heads;
    };
    if (auto* s = autograd::record<Saved>(
            "attention",
            [](autograd::Backward& g, const Saved& s) {
                AttentionBackwardCall call{.d_qkv = arg(g.write_grad(0)), .d_y = arg(g.grad_out()), .att = arg(s.att),
                                           .qkv = arg(s.qkv), .heads = s.heads};
                run(s.qkv.get(), call);
            },
            {&qkv}, {&y}))
        *s = {.qkv = qkv, .att = att, .heads = heads};
    return y;
}

}  // namespace levers::ops
#endif  // !__CUDACC__

// Causal self-attention without the [T, T] matrices (flash-style: tiles in
// shared memory, tensor cores), the fused kernel a GPU runs in bf16 with
// head size 64 or 128 (the same kernels as causal_attention.hpp's); the same
// function as attention.hpp's. Forward saves each
// query row's log-sum-exp, lse [B·H·T] in f32; backward writes all of d_qkv.
// Only the CUDA backend has it: CausalSelfAttention picks it where
// flash_attention_applies(), and the unfused op elsewhere.
#pragma once

#include "levers/kernels/attention.hpp"

namespace levers {

// "flash_attention": y and lse from qkv.
struct FlashAttentionCall : KernelCallBase {
    static constexpr const char* kName = "flash_attention";
    TensorArg y, lse, qkv;
    std::int64_t heads = 1;
};
// "flash_attention_backward": d_qkv (written).
struct FlashAttentionBackwardCall : KernelCallBase {
    static constexpr const char* kName = "flash_attention_backward";
    TensorArg d_qkv, d_y, y, lse, qkv;
    std::int64_t heads = 1;
};

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/causal_attention.hpp"

namespace levers::ops {

// Whether the fused kernel runs for qkv of `channels` x `heads` in `dtype` on
// `device`: a backend has it there, the head size is 64 or 128, and
// LEVERS_FUSED_ATTENTION=0 does not ask for the unfused op.
inline bool flash_attention_applies(Device device, DType dtype, std::int64_t channels, std::int64_t heads) {
    if (fused_attention_turned_off()) return false;
    return heads > 0 && (channels == 64 * heads || channels == 128 * heads) &&
           has_kernel("flash_attention", device.kind, dtype);
}

// attention(qkv, heads) through the fused kernel; differentiable.
inline Tensor flash_attention(const Tensor& qkv_in, std::int64_t heads) {
    const Tensor qkv = dense(qkv_in);
    const std::int64_t channels = attention_channels("flash_attention", qkv, heads);
    const std::int64_t batch = qkv.dim(0), time = qkv.dim(1);
    Tensor y = Tensor::empty({batch, time, channels}, qkv.dtype(), qkv.device());
    Tensor lse = Tensor::empty({batch * heads * time}, DType::f32, qkv.device());
    FlashAttentionCall call{.y = arg(y), .lse = arg(lse), .qkv = arg(qkv), .heads = heads};
    run(qkv, call);
    struct Saved {
        autograd::SavedTensor qkv, y, lse;
        std::int64_t heads;
    };
    if (auto* s = autograd::record<Saved>(
            "flash_attention",
            [](autograd::Backward& g, const Saved& s) {
                FlashAttentionBackwardCall call{.d_qkv = arg(g.write_grad(0)), .d_y = arg(g.grad_out()),
                                                .y = arg(s.y), .lse = arg(s.lse), .qkv = arg(s.qkv),
                                                .heads = s.heads};
                run(s.qkv.get(), call);
            },
            {&qkv}, {&y}))
        *s = {.qkv = qkv, .y = y, .lse = lse, .heads = heads};
    return y;
}

}  // namespace levers::ops
#endif  // !__CUDACC__

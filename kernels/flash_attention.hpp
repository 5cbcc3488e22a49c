// Causal self-attention without the [T, T] matrices (flash-style: tiles in
// shared memory, tensor cores), the fused kernel a card runs in bf16 with
// head size 64; the same function as attention.hpp's. Forward saves each
// query row's log-sum-exp, lse [B·H·T] in f32; backward writes all of d_qkv.
// Only the CUDA backend has it: CausalSelfAttention picks it where
// flash_attention_applies(), and the unfused op elsewhere.
//
// Kernel "flash_attention": t0 y, t1 lse, t2 qkv; i0 heads.
// "flash_attention_backward": t0 d_qkv, t1 d_y, t2 y, t3 lse, t4 qkv; i0 heads.
#pragma once

#include "kernels/attention.hpp"

#include "framework/core/environment.hpp"

#include <cstdlib>
#include <string>

namespace levers::ops {

// Whether the fused kernel runs for qkv of `channels` x `heads` in `dtype` on
// `device`: a backend has it there, the head size is 64, and
// LEVERS_FUSED_ATTENTION=0 does not ask for the unfused op.
inline bool flash_attention_applies(Device device, DType dtype, std::int64_t channels, std::int64_t heads) {
    const char* fused = env::get("LEVERS_FUSED_ATTENTION");
    if (fused && std::string(fused) == "0") return false;
    return heads > 0 && channels == 64 * heads && has_kernel("flash_attention", device.kind, dtype);
}

// attention(qkv, heads) through the fused kernel; differentiable.
inline Tensor flash_attention(const Tensor& qkv, std::int64_t heads) {
    static KernelSlot& forward = kernel_slot("flash_attention");
    const std::int64_t channels = attention_channels("flash_attention", qkv, heads);
    const std::int64_t batch = qkv.dim(0), time = qkv.dim(1);
    Tensor y = Tensor::empty({batch, time, channels}, qkv.dtype(), qkv.device());
    Tensor lse = Tensor::empty({batch * heads * time}, DType::f32, qkv.device());
    KernelCall call = call_of(y, lse, qkv);
    call.i[0] = heads;
    run(forward, qkv, call);
    if (auto* node = autograd::record(
            "flash_attention",
            [](autograd::Backward& g) {
                static KernelSlot& backward = kernel_slot("flash_attention_backward");
                KernelCall call = call_of(g.write_grad(0), g.grad_out(), g.saved(1), g.saved(2), g.saved(0));
                call.i[0] = g.attr_int(0);
                run(backward, g.saved(0), call);
            },
            {&qkv}, {&y})) {
        node->save(0, qkv);
        node->save(1, y);
        node->save(2, lse);
        node->ints[0] = heads;
    }
    return y;
}

}  // namespace levers::ops

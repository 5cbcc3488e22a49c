// AdamW with decoupled weight decay (Loshchilov & Hutter; PyTorch's AdamW):
//   p ← p · (1 − lr·wd);  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²
//   p ← p − lr · (m / (1−β1ᵗ)) / (√(v / (1−β2ᵗ)) + ε)
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"
#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"
#endif

#include <cmath>
#include <cstdint>
#include <vector>

namespace levers::kernels {

struct AdamWHyper {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.0;
};

// One element. bc1 = 1 − β1ᵗ, bc2 = 1 − β2ᵗ (bias corrections for step t ≥ 1).
template <class T>
LEVERS_HD void adamw_element(T& p, T& m, T& v, T g, T lr, T beta1, T beta2, T eps, T weight_decay, T bc1, T bc2) {
    p -= lr * weight_decay * p;
    m = beta1 * m + (T(1) - beta1) * g;
    v = beta2 * v + (T(1) - beta2) * g * g;
    // As PyTorch's AdamW writes it: the corrections' factors hoist out of a loop over elements, leaving one
    // square root and one division each.
    p -= lr / bc1 * m / (std::sqrt(v) * (T(1) / std::sqrt(bc2)) + eps);
}

// A run of at most kAdamWChunk elements of one parameter tensor in the flat
// buffer: the unit of work of the one-launch AdamW on GPUs, which needs each
// run's weight-decay flag without a launch per tensor.
struct AdamWChunk {
    std::int64_t start = 0;
    std::int32_t count = 0;
    std::int32_t decay = 0;  // 1: weight decay applies
};
inline constexpr std::int32_t kAdamWChunk = 4096;
// Appends the chunks covering [start, start + n) to `out`.
void append_adamw_chunks(std::vector<AdamWChunk>& out, std::int64_t start, std::int64_t n, bool decay);

}  // namespace levers::kernels

namespace levers {
// "adamw" (non-differentiable; by the parameters' dtype): param, m, v (the
// moments) updated in place from grad (f32, f64, or bf16 for f32 parameters on
// a GPU); chunks is the chunk table (AdamWChunk as i32 x 4, where the kernel
// runs); the weight decay applies to chunks that decay.
struct AdamWCall : KernelCallBase {
    static constexpr const char* kName = "adamw";
    TensorArg param, m, v, grad, chunks;
    kernels::AdamWHyper hyper;
    std::int64_t step = 1;  // from 1
};
}  // namespace levers

namespace levers::kernels {

namespace cpu {
// Updates param, m and v (n elements each) in place for step t >= 1.
// Pass weight_decay = 0 in `h` for parameters that must not decay (biases, norms).
template <class T> void adamw_step(T* param, T* m, T* v, const T* grad, index_t n, const AdamWHyper& h, long step);
}  // namespace cpu

}  // namespace levers::kernels

// The op itself is host code of levers' C++; nvcc compiles only the maths above.
#if !defined(__CUDACC__)

namespace levers::ops {

// One AdamW step over flat param, m, v with gradients `grad`; `chunks` is the
// chunk table beside the parameters (i32 [4 x chunks]).
inline void adamw_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                         const Tensor& chunks, const kernels::AdamWHyper& h, long step) {
    AdamWCall call{.param = arg(param), .m = arg(m), .v = arg(v), .grad = arg(grad), .chunks = arg(chunks),
                   .hyper = h, .step = step};
    run(param, call);
}

}  // namespace levers::ops

#endif  // !__CUDACC__

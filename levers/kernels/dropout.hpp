// dropout: each element is zeroed with probability p and the survivors
// scaled by 1 / (1 - p). Which elements survive is a hash of a 64-bit key
// and the element's index (counter-based, as PyTorch's Philox on GPUs), so
// backward recomputes the mask instead of storing it, and a run resumes
// exactly from the key alone.
//
// Backward applies the same mask to the gradient with the same kernel, which
// reads contiguous memory: the op makes its input so.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"
#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"
#endif

#include <bit>
#include <cstdint>

namespace levers {

// "dropout": out (may alias in) = in masked and scaled.
struct DropoutCall : KernelCallBase {
    static constexpr const char* kName = "dropout";
    TensorArg out, in;
    std::uint64_t key = 0;
    double p = 0;
};

}  // namespace levers

namespace levers::kernels {

// splitmix64's finaliser: every input bit moves every output bit.
LEVERS_HD std::uint64_t mix64(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Whether element i survives dropout with probability p under `key`.
LEVERS_HD bool dropout_keeps(std::uint64_t key, index_t i, float p) {
    const std::uint64_t h = mix64(key + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull);
    return static_cast<float>(h >> 40) * (1.0f / 16777216.0f) >= p;  // 24 uniform bits
}

namespace cpu {
// out[n] = keeps(i) ? in[i] / (1 - p) : 0.
template <class T> void dropout_forward(T* out, const T* in, index_t n, std::uint64_t key, float p);
}  // namespace cpu

}  // namespace levers::kernels

// The op itself is host code of levers' C++; nvcc compiles only the maths above.
#if !defined(__CUDACC__)

namespace levers::ops {

inline void dropout_into(const Tensor& out, const Tensor& in, std::uint64_t key, double p) {
    DropoutCall call{.out = arg(out), .in = arg(in), .key = key, .p = p};
    run(in, call);
}

// x with each element dropped with probability p (0 <= p < 1) under `key`;
// p = 0 is x itself. Differentiable.
inline Tensor dropout(const Tensor& input, double p, std::uint64_t key) {
    check_float("dropout", "x", input);
    LEVERS_CHECK(p >= 0 && p < 1, "dropout: p must be in [0, 1), got {}", p);
    if (p == 0) return input;
    const Tensor x = dense(input);
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    dropout_into(out, x, key, p);
    struct Saved {
        std::uint64_t key;
        double p;
    };
    if (auto* s = autograd::record<Saved>(
            "dropout",
            [](autograd::Backward& g, const Saved& s) { dropout_into(g.write_grad(0), g.grad_out(), s.key, s.p); },
            {&x}, {&out}))
        *s = {key, p};
    return out;
}

}  // namespace levers::ops

#endif  // !__CUDACC__

// Rotary position embeddings in Hugging Face's layout, fused: each head's
// halves (x1, x2) become (x1·cos − x2·sin, x2·cos + x1·sin) in one pass,
// where the general-op form (two narrows, a negation, a cat, two products
// and a sum) makes five tensors. Backward is the same rotation by the
// opposite angle. The cos and sin tables are RotaryEmbedding's (levers/nn/rotary.hpp).
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

namespace levers {

// "rope": out = x rotated; x and out [B, T, H, D] dense, cos and sin [T, D]
// (every batch row alike) or [B, T, D]; `inverse` rotates by −angle (the backward).
struct RopeCall : KernelCallBase {
    static constexpr const char* kName = "rope";
    TensorArg out, x, cos, sin;
    bool inverse = false;
};

}  // namespace levers

namespace levers::kernels {

// Element d < D/2 of a head and its partner d + D/2, rotated by the table row's angle.
template <class A>
LEVERS_HD void rope_pair(A& out1, A& out2, A x1, A x2, A c, A s, bool inverse) {
    if (inverse) s = -s;
    out1 = x1 * c - x2 * s;
    out2 = x2 * c + x1 * s;
}

}  // namespace levers::kernels

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// x [B, T, H, D] rotated by the angles whose cos and sin are [T, D] or [B, T, D]
// (the table rows of each position); differentiable in x. Equal to
// x · cos + rotate_half(x) · sin with the tables broadcast over the heads.
inline Tensor rope(const Tensor& input, const Tensor& cos_in, const Tensor& sin_in) {
    check_float("rope", "x", input);
    const Tensor x = dense(input), cos = dense(cos_in), sin = dense(sin_in);
    LEVERS_CHECK(x.ndim() == 4 && x.dim(-1) % 2 == 0, "rope: x is {}, expected [batch, time, heads, even head size]",
                 x.shape().str());
    check_like("rope", "cos", cos, "x", x);
    check_like("rope", "sin", sin, "x", x);
    const bool batched = cos.ndim() == 3;
    const Shape want = batched ? Shape{x.dim(0), x.dim(1), x.dim(3)} : Shape{x.dim(1), x.dim(3)};
    LEVERS_CHECK(cos.shape() == want && sin.shape() == want, "rope: cos {} and sin {} for x {}; expected {}",
                 cos.shape().str(), sin.shape().str(), x.shape().str(), want.str());
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    RopeCall call{.out = arg(out), .x = arg(x), .cos = arg(cos), .sin = arg(sin)};
    run(x, call);
    struct Saved {
        autograd::SavedTensor cos, sin;
    };
    if (auto* s = autograd::record<Saved>(
            "rope",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor d_x = g.write_grad(0), d_out = dense(g.grad_out());
                RopeCall call{.out = arg(d_x), .x = arg(d_out), .cos = arg(s.cos), .sin = arg(s.sin), .inverse = true};
                run(d_out, call);
            },
            {&x}, {&out}))
        *s = {.cos = cos, .sin = sin};
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__

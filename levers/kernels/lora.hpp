// LoRA (Hu et al., 2021): a frozen linear layer W gains a trainable low-rank
// update, out += scale · (in · Aᵀ) · Bᵀ with A [rank, in_dim], B [out_dim, rank]
// (nn.Linear layouts) and scale = alpha / rank. B starts at zero, so training
// starts from the frozen model exactly.
//
// Conventions as in gelu.hpp, except that backward *adds* into d_in: the
// frozen layer's own backward has already written it. The kernels read
// contiguous rows: the op makes its input so.
#pragma once

#include "levers/kernels/common.hpp"
#include "levers/kernels/linear.hpp"

namespace levers {

// "lora": out (added to), u = in · Aᵀ (written, kept for backward).
struct LoraCall : KernelCallBase {
    static constexpr const char* kName = "lora";
    TensorArg out, u, in, a, b;
    double scale = 1;
};
// "lora_backward": d_in (optional, added to), d_a, d_b (added to), du (scratch [n, rank]).
struct LoraBackwardCall : KernelCallBase {
    static constexpr const char* kName = "lora_backward";
    TensorArg d_in, d_a, d_b, du, d_out, in, u, a, b;
    double scale = 1;
};

}  // namespace levers

namespace levers::kernels::cpu {

// u[n, rank] = in · Aᵀ (saved for backward); out[n, out_dim] += scale · u · Bᵀ.
template <class T>
void lora_forward(T* out, T* u, const T* in, const T* a, const T* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, T scale);

// du[n, rank] is scratch. d_b += scale · d_outᵀ · u; du = scale · d_out · B;
// d_a += duᵀ · in; d_in += du · A (skipped if null).
template <class T>
void lora_backward(T* d_in, T* d_a, T* d_b, T* du, const T* d_out, const T* in, const T* u, const T* a, const T* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, T scale);

// W[out_dim, in_dim] += scale · B · A: the adapter folded into the frozen weight.
template <class T>
void lora_merge(T* weight, const T* a, const T* b, index_t in_dim, index_t out_dim, index_t rank, T scale);

}  // namespace levers::kernels::cpu

#if !defined(__CUDACC__)
namespace levers::ops {

// linear(in, weight, bias) + scale · (in · aᵀ) · bᵀ: a linear layer with its
// LoRA adapter (a [rank, in_dim], b [out_dim, rank]); differentiable in all.
inline Tensor lora_linear(const Tensor& in_, const Tensor& weight_, const Tensor& bias_, const Tensor& a_,
                          const Tensor& b_, double scale) {
    const Tensor in = dense(in_), weight = dense(weight_), bias = dense(bias_), a = dense(a_), b = dense(b_);
    const Shape shape = linear_shape("lora_linear", in, weight, bias);
    const std::int64_t in_dim = weight.dim(1), out_dim = weight.dim(0);
    check_like("lora_linear", "lora_a", a, "input", in);
    check_like("lora_linear", "lora_b", b, "input", in);
    LEVERS_CHECK(a.shape().ndim() == 2 && a.dim(1) == in_dim,
                 "lora_linear: 'lora_a' is {}, 'weight' {} needs [rank, {}]", describe(a), weight.shape().str(), in_dim);
    const std::int64_t rank = a.dim(0);
    check_shape("lora_linear", "lora_b", b, {out_dim, rank}, [&] {
        return fmt::format("'weight' {} and 'lora_a' {} need [{}, {}]", weight.shape().str(), a.shape().str(), out_dim,
                           rank);
    });
    Tensor out = Tensor::empty(shape, in.dtype(), in.device());
    Tensor u = Tensor::empty({in.shape().rows(), rank}, in.dtype(), in.device());
    linear_into(out, in, weight, bias);
    LoraCall call{.out = arg(out), .u = arg(u), .in = arg(in), .a = arg(a), .b = arg(b), .scale = scale};
    run(in, call);
    struct Saved {
        autograd::SavedTensor in, weight, u, a, b;
        double scale;
    };
    if (auto* s = autograd::record<Saved>(
            "lora_linear",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor &x = s.in, &u = s.u;
                const Tensor d_in = g.needs_grad(0) ? g.write_grad(0) : Tensor();
                const Tensor d_w = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                const Tensor d_b = g.needs_grad(2) ? g.add_grad(2) : Tensor();
                // The frozen layer's backward writes d_in; the adapter's adds into it.
                if (d_in.defined() || d_w.defined() || d_b.defined())
                    linear_backward_into(d_in, d_w, d_b, g.grad_out(), x, s.weight);
                const Tensor d_a = g.add_grad_or_scratch(3), d_bm = g.add_grad_or_scratch(4);
                const Tensor du = Tensor::empty(u.shape(), u.dtype(), u.device());
                LoraBackwardCall call{.d_in = arg(d_in), .d_a = arg(d_a), .d_b = arg(d_bm), .du = arg(du),
                                      .d_out = arg(g.grad_out()), .in = arg(x), .u = arg(u), .a = arg(s.a),
                                      .b = arg(s.b), .scale = s.scale};
                run(x, call);
            },
            {&in, &weight, &bias, &a, &b}, {&out}))
        *s = {.in = in, .weight = weight, .u = u, .a = a, .b = b, .scale = scale};
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__

// Ops of the user's own, outside levers' tree.
//
// ScaledTanh is written with tensors: a forward and a backward made of
// levers' ops, recorded as one node (autograd::Function). It runs wherever
// those ops run, GPUs included, and needs no kernel.
//
// cube() has a kernel of its own on the CPU, registered from here with
// LEVERS_KERNEL under a call type the user names; on a device with no such
// kernel it is refused by name, and `--device auto` keeps a model that uses
// it on the CPU. (A CUDA kernel registers the same way, from a .cu file of
// the user's: LEVERS_KERNEL(CubeCall, cuda, f32, fn).)
#pragma once

#include <levers/core/function.hpp>
#include <levers/nn/nn.hpp>

namespace user {

using namespace levers;

// tanh(x) · scale
struct ScaledTanh : autograd::Function<ScaledTanh> {
    static constexpr const char* kName = "scaled_tanh";
    static Tensor forward(autograd::Context& ctx, const Tensor& x, double scale) {
        const Tensor y = ops::tanh(x);
        ctx.save(y);
        ctx.attributes[0] = scale;
        return y * scale;
    }
    static std::vector<Tensor> backward(const autograd::Context& ctx, const Tensor& grad) {
        const Tensor& y = ctx.saved(0);
        return {grad * (1.0 - ops::square(y)) * ctx.attributes[0]};
    }
};

// x³ through a kernel of the user's own: its call names what the kernel reads.
struct CubeCall : KernelCallBase {
    static constexpr const char* kName = "user_cube";
    TensorArg out, in;
};
template <class T> void cube_kernel(const CubeCall& c) {
    const T* x = c.in.as<const T>();
    T* y = c.out.as<T>();
    for (std::int64_t i = 0; i < c.in.numel(); ++i) y[i] = x[i] * x[i] * x[i];
}
LEVERS_KERNEL(CubeCall, cpu, f32, cube_kernel<float>);
LEVERS_KERNEL(CubeCall, cpu, f64, cube_kernel<double>);

struct Cube : autograd::Function<Cube> {
    static constexpr const char* kName = "user_cube";
    static Tensor forward(autograd::Context& ctx, const Tensor& x_in) {
        const Tensor x = x_in.contiguous();  // the kernel reads contiguous memory
        Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
        CubeCall call{.out = ops::arg(y), .in = ops::arg(x)};
        ops::run(x, call);
        ctx.save(x);
        return y;
    }
    static std::vector<Tensor> backward(const autograd::Context& ctx, const Tensor& grad) {
        return {grad * ops::square(ctx.saved(0)) * 3.0};  // the backward from general ops
    }
};
inline Tensor cube(const Tensor& x) { return Cube::apply(x); }

}  // namespace user

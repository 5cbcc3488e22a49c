// The unary entries of levers/kernels/elementwise_math.hpp on the GPU, forward and
// backward, through the strided kernel (levers/kernels/cuda/strided.cuh). (A file
// of their own: nvcc builds the lists' many kernels side by side.)
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/strided.cuh"
#include "levers/core/generic_calls.hpp"
#include "levers/kernels/elementwise_math.hpp"

#include <cstdint>

namespace levers::kernels::cuda {

namespace {

template <class Op, class C> struct UnaryF {
    double p0, p1;
    __device__ C operator()(C x) const { return Op::template f<C>(x, static_cast<C>(p0), static_cast<C>(p1)); }
};
template <class Op, class C> struct UnaryGradF {
    double p0, p1;
    __device__ C operator()(C g, C x, C y) const {
        return g * Op::template df<C>(x, y, static_cast<C>(p0), static_cast<C>(p1));
    }
};
template <class Op> struct Unary {
    template <class S> static void forward(const ElementwiseCall& c) {
        map_strided<S, S>(stream_of(c), c.out, UnaryF<Op, acc_t<S>>{c.p[0], c.p[1]}, c.in[0]);
    }
    template <class S> static void backward(const ElementwiseCall& c) {
        map_strided<S, S, S, S>(stream_of(c), c.out, UnaryGradF<Op, acc_t<S>>{c.p[0], c.p[1]}, c.in[0], c.in[1],
                                c.in[2]);
    }
};
#define LEVERS_CUDA_UNARY_FLOAT(name, value, derivative)                                          \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kName, ElementwiseCall, Unary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Unary<ew::name##_op>::backward);
#define LEVERS_CUDA_UNARY_ANY(name, value, derivative)                                        \
    LEVERS_CUDA_NUMBERS(ew::name##_op::kName, ElementwiseCall, Unary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Unary<ew::name##_op>::backward);

LEVERS_UNARY_FLOAT_OPS(LEVERS_CUDA_UNARY_FLOAT)
LEVERS_UNARY_ANY_OPS(LEVERS_CUDA_UNARY_ANY)
LEVERS_UNARY_PARAM_FLOAT_OPS(LEVERS_CUDA_UNARY_FLOAT)
LEVERS_UNARY_PARAM_ANY_OPS(LEVERS_CUDA_UNARY_ANY)

}  // namespace

}  // namespace levers::kernels::cuda

// The binary entries of levers/kernels/elementwise_math.hpp on the GPU, forward and
// backward, the comparisons and the logic on masks, through the strided
// kernel (levers/kernels/cuda/strided.cuh); binary ops on contiguous operands of one
// shape move 16 bytes per load.
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/strided.cuh"
#include "levers/core/generic_calls.hpp"
#include "levers/kernels/elementwise_math.hpp"

#include <cstdint>
#include <type_traits>

namespace levers::kernels::cuda {

namespace {

template <class Op, class C> struct BinaryF {
    __device__ C operator()(C a, C b) const { return Op::template f<C>(a, b); }
};
template <class Op, class C> struct BinaryGradF {
    bool wrt_b;
    __device__ C operator()(C g, C a, C b, C y) const {
        return g * (wrt_b ? Op::template db<C>(a, b, y) : Op::template da<C>(a, b, y));
    }
};
template <class Op, class C> struct PredicateF {
    __device__ bool operator()(C a, C b) const { return Op::template f<C>(a, b); }
};
template <class Op, class C> struct PredicateScalarF {
    double b;
    __device__ bool operator()(C a) const { return Op::template f<C>(a, static_cast<C>(b)); }
};

// out = f(a, b) over 16-byte packs, for contiguous operands of one shape.
template <class Op, class S> struct BinaryPacked {
    S* out;
    const S *a, *b;
    template <int W> __device__ void apply(index_t i) const {
        const auto x = load_pack<W>(a + i), y = load_pack<W>(b + i);
        Pack<S, W> z;
        for (int j = 0; j < W; ++j) z.v[j] = store<S>(Op::template f<acc_t<S>>(load(x.v[j]), load(y.v[j])));
        store_pack(out + i, z);
    }
};

template <class Op> struct Binary {
    template <class S> static void forward(const ElementwiseCall& c) {
        const TensorArg &out = c.out, &a = c.in[0], &b = c.in[1];
        if (a.shape == out.shape && b.shape == out.shape && out.contiguous() && a.contiguous() && b.contiguous()) {
            if constexpr (!std::is_same_v<S, bool>)
                return map<kPack<S>>(BinaryPacked<Op, S>{ptr<S>(out), ptr<const S>(a), ptr<const S>(b)}, out.numel(),
                                     aligned16({out.data, a.data, b.data}), stream_of(c));
        }
        map_strided<S, S, S>(stream_of(c), out, BinaryF<Op, acc_t<S>>{}, a, b);
    }
    template <class S> static void backward(const ElementwiseCall& c) {
        map_strided<S, S, S, S, S>(stream_of(c), c.out, BinaryGradF<Op, acc_t<S>>{c.which == 1}, c.in[0], c.in[1],
                                   c.in[2], c.in[3]);
    }
};
template <class Op> struct Predicate {
    template <class S> static void forward(const ElementwiseCall& c) {
        if (!c.in[1].defined())
            return map_strided<bool, S>(stream_of(c), c.out, PredicateScalarF<Op, acc_t<S>>{c.p[0]}, c.in[0]);
        map_strided<bool, S, S>(stream_of(c), c.out, PredicateF<Op, acc_t<S>>{}, c.in[0], c.in[1]);
    }
};

#define LEVERS_CUDA_BINARY_FLOAT(name, value, d_a, d_b)                                            \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kName, ElementwiseCall, Binary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Binary<ew::name##_op>::backward);
#define LEVERS_CUDA_BINARY_ANY(name, value, d_a, d_b)                                          \
    LEVERS_CUDA_NUMBERS(ew::name##_op::kName, ElementwiseCall, Binary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Binary<ew::name##_op>::backward);
#define LEVERS_CUDA_COMPARE(name, value)                                                          \
    LEVERS_CUDA_NUMBERS(ew::name##_op::kName, ElementwiseCall, Predicate<ew::name##_op>::forward); \
    LEVERS_KERNEL_NAMED(ew::name##_op::kName, ElementwiseCall, cuda, boolean, Predicate<ew::name##_op>::forward<bool>);
#define LEVERS_CUDA_LOGIC(name, value) \
    LEVERS_KERNEL_NAMED(ew::name##_op::kName, ElementwiseCall, cuda, boolean, Predicate<ew::name##_op>::forward<bool>);

LEVERS_BINARY_FLOAT_OPS(LEVERS_CUDA_BINARY_FLOAT)
LEVERS_BINARY_ANY_OPS(LEVERS_CUDA_BINARY_ANY)
LEVERS_COMPARE_OPS(LEVERS_CUDA_COMPARE)
LEVERS_LOGIC_OPS(LEVERS_CUDA_LOGIC)

}  // namespace

}  // namespace levers::kernels::cuda

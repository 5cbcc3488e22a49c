// What the CUDA files share to register their kernels (levers/core/kernel.hpp):
// the call's stream, its tensors as typed pointers, and one registration
// per storage type. Adapters read the slots the op's header documents.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/cuda/ops.hpp"

namespace levers::kernels::cuda {

inline cudaStream_t stream_of(const KernelCallBase& c) { return static_cast<cudaStream_t>(c.stream); }

template <class S> S* ptr(const TensorArg& t) { return static_cast<S*>(t.data); }

}  // namespace levers::kernels::cuda

// Registers `fn<float>`, `fn<double>` and `fn<bf16>` as the GPU's kernels of the op whose call is `Call`.
#define LEVERS_CUDA_KERNELS(Call, fn) LEVERS_CUDA_KERNELS_NAMED(Call::kName, Call, fn)
// The same under `name`, for ops that share one call type.
#define LEVERS_CUDA_KERNELS_NAMED(name, Call, fn)                                    \
    LEVERS_KERNEL_NAMED(name, Call, cuda, f32, fn<float>);                           \
    LEVERS_KERNEL_NAMED(name, Call, cuda, f64, fn<double>);                          \
    LEVERS_KERNEL_NAMED(name, Call, cuda, bf16, fn<::levers::kernels::cuda::bf16>)
// The same and i32: ops on floats and integers.
#define LEVERS_CUDA_NUMBERS(name, Call, fn) \
    LEVERS_CUDA_KERNELS_NAMED(name, Call, fn); \
    LEVERS_KERNEL_NAMED(name, Call, cuda, i32, fn<std::int32_t>)

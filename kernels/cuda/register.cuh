// What the CUDA files share to register their kernels (framework/core/kernel.hpp):
// the call's stream, its tensors as typed pointers, and one registration
// per storage type. Adapters read the slots the op's header documents.
#pragma once

#include "framework/core/kernel.hpp"
#include "kernels/cuda/ops.hpp"

namespace levers::kernels::cuda {

inline cudaStream_t stream_of(const KernelCall& c) { return static_cast<cudaStream_t>(c.stream); }

template <class S> S* ptr(const TensorArg& t) { return static_cast<S*>(t.data); }

}  // namespace levers::kernels::cuda

// Registers `fn<float>`, `fn<double>` and `fn<bf16>` as the card's kernel `name`.
#define LEVERS_CUDA_KERNELS(name, fn)                                                \
    LEVERS_KERNEL(name, cuda, f32, fn<float>);                                       \
    LEVERS_KERNEL(name, cuda, f64, fn<double>);                                      \
    LEVERS_KERNEL(name, cuda, bf16, fn<::levers::kernels::cuda::bf16>)

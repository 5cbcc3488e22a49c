// The sum of one value per thread over a block of `kThreads` threads (a power
// of two, the block's size), by a tree in shared memory: the same order every
// run. Every thread of the block must call it; every thread gets the sum.
#pragma once

namespace levers::kernels::cuda {

template <int kThreads, class T> __device__ T block_sum(T value) {
    __shared__ T partial[kThreads];
    __syncthreads();  // an earlier call's readers are done with `partial`
    partial[threadIdx.x] = value;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    return partial[0];
}

}  // namespace levers::kernels::cuda

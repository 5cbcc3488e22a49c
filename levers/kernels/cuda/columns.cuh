// Column sums of a [rows, cols] array, out[c] += Σ_r f(r, c), without
// atomics: one pass sums chunks of rows per column (threads along columns, so
// reads coalesce), a second adds the chunks' partial sums in a fixed order.
// The same sums every run, and enough blocks to fill a GPU even when there
// are few columns (a bias of 768).
#pragma once

#include "levers/kernels/cuda/device_math.cuh"

#include <algorithm>

namespace levers::kernels::cuda {

template <class S> struct ColumnValue {  // f(r, c) = a[r, c]
    const S* a;
    index_t cols;
    __device__ acc_t<S> operator()(index_t r, index_t c) const { return load(a[r * cols + c]); }
};

template <class A, class F>
__global__ void column_partials_kernel(A* partial, index_t rows, index_t cols, index_t chunk_rows, F f) {
    const index_t c = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (c >= cols) return;
    const index_t begin = blockIdx.y * chunk_rows, end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
    A s = 0;
    for (index_t r = begin; r < end; ++r) s += f(r, c);
    partial[blockIdx.y * cols + c] = s;
}

// Adds the chunks' partial sums to out: a block takes kFinishColumns columns
// with kFinishParts threads on each; thread part p sums chunks p, p + parts,
// ... in order, then the parts are added in order (the same sums every run,
// and parts x columns threads loading at once rather than one per column).
constexpr int kFinishColumns = 32, kFinishParts = 8;

template <class S, class A>
__global__ void column_finish_kernel(S* out, const A* partial, index_t chunks, index_t cols) {
    __shared__ A sums[kFinishParts][kFinishColumns];
    const int column = threadIdx.x % kFinishColumns, part = threadIdx.x / kFinishColumns;
    const index_t c = blockIdx.x * static_cast<index_t>(kFinishColumns) + column;
    A s = 0;
    if (c < cols)
        for (index_t k = part; k < chunks; k += kFinishParts) s += partial[k * cols + c];
    sums[part][column] = s;
    __syncthreads();
    if (part != 0 || c >= cols) return;
    A total = 0;
    for (int p = 0; p < kFinishParts; ++p) total += sums[p][column];
    out[c] = store<S>(load(out[c]) + total);
}

// out[c] += Σ_k partial[k, c] over `chunks` rows of partial sums.
template <class S, class A>
void finish_column_sums(S* out, const A* partial, index_t chunks, index_t cols, cudaStream_t stream) {
    LEVERS_LAUNCH(column_finish_kernel<<<blocks_for(cols, kFinishColumns), kFinishColumns * kFinishParts, 0,
                                         stream>>>(out, partial, chunks, cols));
}

template <class S, class F> void add_column_sums(S* out, index_t rows, index_t cols, F f, cudaStream_t stream) {
    using A = acc_t<S>;
    constexpr int kThreads = 128;
    if (rows <= 0 || cols <= 0) return;
    // 64 rows per chunk unless that needs more chunks than a grid's y allows.
    const index_t chunk_rows = std::max<index_t>(64, (rows + 65534) / 65535);
    const index_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    Scratch<A> partial(static_cast<std::size_t>(chunks * cols));
    const dim3 grid(blocks_for(cols, kThreads), static_cast<unsigned>(chunks));
    LEVERS_LAUNCH(column_partials_kernel<<<grid, kThreads, 0, stream>>>(partial.get(), rows, cols, chunk_rows, f));
    finish_column_sums(out, partial.get(), chunks, cols, stream);
}

}  // namespace levers::kernels::cuda

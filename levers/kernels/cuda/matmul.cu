// Batched matrix products on the GPU (levers/kernels/matmul.hpp) through cuBLAS's
// strided-batched GEMM: row-major arrays are seen as their column-major
// transposes, transposed views go in as they lie (cuBLAS's transpose flags),
// the batch dimensions are merged where their strides allow and looped over
// where they do not. bf16 products accumulate in f32.
#include "levers/kernels/matmul.hpp"
#include "levers/kernels/cuda/blas.cuh"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/strided_plan.hpp"

#include <algorithm>

namespace levers::kernels::cuda {

namespace {

template <class S> void matmul_call(const MatmulCall& c) {
    const int nd = c.out.shape.ndim();
    const index_t m = c.out.shape[nd - 2], n = c.out.shape[nd - 1], k = c.a.shape[nd - 1];
    const MatrixLayout la = layout_of(c.a), lb = layout_of(c.b);
    // The batch dimensions, merged where out, a and b all allow (out's are contiguous).
    Shape batch;
    Strides s_out, s_a, s_b;
    for (int d = 0; d < nd - 2; ++d) {
        s_out[batch.ndim()] = c.out.strides[d];
        s_a[batch.ndim()] = c.a.strides[d];
        s_b[batch.ndim()] = c.b.strides[d];
        batch = batch.appended(c.out.shape[d]);
    }
    const StridedLoop<3> l = plan_loop<3>(batch, {s_out, s_a, s_b});
    // cuBLAS column-major: outᵀ [n, m] = bᵀ · aᵀ. A row-major operand is its transpose as it lies (no flag).
    const cublasOperation_t op_b = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasOperation_t op_a = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    const acc_t<S> alpha = 1, beta = c.accumulate ? 1 : 0;
    const index_t inner = l.ndim == 0 ? 1 : l.size[static_cast<std::size_t>(l.ndim - 1)];
    const index_t outer = l.numel / std::max<index_t>(inner, 1);
    const long long step_out = l.ndim == 0 ? m * n : l.inner(0), step_a = l.ndim == 0 ? 0 : l.inner(1),
                    step_b = l.ndim == 0 ? 0 : l.inner(2);
    if (m == 0 || n == 0 || l.numel == 0) return;
    if (k == 0) {  // an empty sum
        if (!c.accumulate)
            LEVERS_CUDA_CHECK(cudaMemsetAsync(c.out.data, 0, static_cast<std::size_t>(c.out.numel()) * sizeof(S), stream_of(c)));
        return;
    }
    for (index_t o = 0; o < outer; ++o) {
        // Where batch o · inner starts for each operand.
        index_t at_out = 0, at_a = 0, at_b = 0, rest = o;
        for (int d = l.ndim - 2; d >= 0; --d) {
            const auto u = static_cast<std::size_t>(d);
            const index_t i = rest % l.size[u];
            rest /= l.size[u];
            at_out += i * l.stride[0][u];
            at_a += i * l.stride[1][u];
            at_b += i * l.stride[2][u];
        }
        gemm<S>(stream_of(c), op_b, op_a, n, m, k, alpha, ptr<const S>(c.b) + at_b, lb.ld, step_b,
                ptr<const S>(c.a) + at_a, la.ld, step_a, beta, ptr<S>(c.out) + at_out, n, step_out,
                static_cast<int>(inner));
    }
}
LEVERS_CUDA_KERNELS(MatmulCall, matmul_call);

}  // namespace
}  // namespace levers::kernels::cuda

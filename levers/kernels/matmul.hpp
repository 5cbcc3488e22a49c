// Matrix products with batch dimensions broadcast, as torch.matmul: 1-d
// operands are vectors (a row on the left, a column on the right, removed
// from the result), 2-d ones matrices, and every dimension before the last
// two a batch dimension, broadcast between the two sides. Differentiable:
// d_a = d_out · bᵀ, d_b = aᵀ · d_out, each summed over the batch dimensions
// its side was broadcast along. Transposed views are taken as they are (BLAS
// and cuBLAS read either layout); other strided matrices are copied first.
// On GPUs bf16 products accumulate in f32.
#pragma once

#include "levers/core/kernel.hpp"

namespace levers {

// "matmul": out [..., M, N] = a [..., M, K] · b [..., K, N]. The batch
// dimensions of all three are equal (a and b may repeat through stride 0);
// each matrix of a and b has unit stride along its rows or its columns; out is
// contiguous. `accumulate`: out += a · b instead of out = a · b.
struct MatmulCall : KernelCallBase {
    static constexpr const char* kName = "matmul";
    TensorArg out, a, b;
    bool accumulate = false;
};

namespace kernels {
// How a matrix operand [..., rows, cols] lies, as BLAS and cuBLAS take it:
// row-major with rows `ld` apart, or column-major (a transposed view) with
// columns `ld` apart. A vector lies either way.
struct MatrixLayout {
    bool row_major = true;
    std::int64_t ld = 1;
};
inline MatrixLayout layout_of(const TensorArg& t) {
    const int nd = t.shape.ndim();
    const std::int64_t rows = t.shape[nd - 2], cols = t.shape[nd - 1], rs = t.strides[nd - 2], cs = t.strides[nd - 1];
    if (rows <= 1) return cs == 1 || cols <= 1 ? MatrixLayout{true, cols > 1 ? cols : 1} : MatrixLayout{false, cs};
    if (cols <= 1) return {true, rs};
    return cs == 1 ? MatrixLayout{true, rs} : MatrixLayout{false, cs};
}
}  // namespace kernels

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// a · b (torch.matmul's rules); differentiable.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace levers::ops
#endif  // !__CUDACC__

// y [n, out] = x [n, in] · wᵀ (w [out, in]) for a few rows of x: what each
// decoding step of generation asks of every linear layer. A general matrix
// product (OpenBLAS) first copies w into its packed layout, which for a
// handful of rows costs more than the arithmetic; this reads each row of w
// once, straight from memory, against up to four rows of x at a time.
// Every output is summed in the same order whatever n is, so a row's
// outputs are the same bits alone as in a batch.
#pragma once

#include "levers/kernels/common.hpp"

namespace levers::kernels::cpu {

// The most rows of x for which few_rows_product beats the general product (bench/README.md, batched generation).
constexpr index_t kFewRows = 16;

// Whether this build has the kernel (AVX-512); without it the general product serves every size.
bool have_few_rows_product();

// y = x · wᵀ for n <= kFewRows rows; rows contiguous. Only where have_few_rows_product().
void few_rows_product(float* y, const float* x, const float* w, index_t n, index_t in, index_t out);

}  // namespace levers::kernels::cpu

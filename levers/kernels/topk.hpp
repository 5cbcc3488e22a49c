// The k largest of each row (the last dimension), as torch.topk: their
// values, largest first, and their indices (i32). The kernel ("topk", every
// backend) finds the indices; the values are a gather of them, so they are
// differentiable as gather is. Of equal values the lower index comes first.
// A mixture of experts' router picks each token's experts with it.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

namespace levers {

// "topk" (dtype: in's): index [rows, k] i32 = the positions of each row's k largest values of in
// [rows, cols] (contiguous), largest first.
struct TopkCall : KernelCallBase {
    static constexpr const char* kName = "topk";
    TensorArg index, in;
};

namespace kernels {
// Row `row` of `in`'s k largest, into index[0, k): k passes, each taking the largest not taken yet
// (the lower index of equal ones). Host and device alike; k is small (a router's experts per token).
template <class T, class Load>
LEVERS_HD void topk_row(std::int32_t* index, const T* in, index_t cols, index_t k, Load load) {
    for (index_t j = 0; j < k; ++j) {
        index_t best = -1;
        for (index_t c = 0; c < cols; ++c) {
            bool taken = false;
            for (index_t t = 0; t < j; ++t) taken = taken || index[t] == c;
            if (!taken && (best < 0 || load(in[c]) > load(in[best]))) best = c;
        }
        index[j] = static_cast<std::int32_t>(best);
    }
}
}  // namespace kernels

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

#include <utility>

namespace levers::ops {

// (values, indices) of each row's k largest along the last dimension, largest first; values
// differentiable. k in [1, the last dimension].
std::pair<Tensor, Tensor> topk(const Tensor& x, std::int64_t k);

}  // namespace levers::ops
#endif  // !__CUDACC__

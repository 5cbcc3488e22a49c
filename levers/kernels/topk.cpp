#include "levers/kernels/topk.hpp"

#include "levers/kernels/indexing.hpp"

namespace levers::ops {

std::pair<Tensor, Tensor> topk(const Tensor& x, std::int64_t k) {
    check_float("topk", "x", x);
    check_ndim_at_least("topk", "x", x, 1);
    const std::int64_t cols = x.shape().last();
    LEVERS_CHECK(k >= 1 && k <= cols, "topk: k = {} of rows of {}; k must be in [1, {}]", k, cols, cols);
    const Tensor in = dense(x).detach();
    const Shape shape = x.shape().with_dim(x.shape().ndim() - 1, k);
    Tensor index = Tensor::empty(shape, DType::i32, x.device());
    TopkCall call{.index = arg(index.view({index.numel() / k, k})), .in = arg(in.view({in.numel() / cols, cols}))};
    run(in, call);
    return {gather(x, -1, index), index};
}

}  // namespace levers::ops

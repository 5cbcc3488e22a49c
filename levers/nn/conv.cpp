#include "levers/nn/conv.hpp"

#include <cmath>

namespace levers::nn {

namespace {
std::int64_t checked_groups(std::int64_t in, std::int64_t out, const Conv2d::Options& o) {
    LEVERS_CHECK(o.groups >= 1 && in % o.groups == 0 && out % o.groups == 0,
                 "Conv2d: {} input and {} output channels do not split into {} groups", in, out, o.groups);
    return o.groups;
}
}  // namespace

Conv2d::Conv2d(std::int64_t in, std::int64_t out, ops::Pair kernel, Options options_)
    : weight(param("weight", {out, in / checked_groups(in, out, options_), kernel[0], kernel[1]}, init::fan_in_uniform())),
      options(options_) {
    if (options.bias) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(in / options.groups * kernel[0] * kernel[1]));
        bias = &param("bias", {out}, init::uniform(-bound, bound));
    }
}

Conv2d::Conv2d(Module& parent, std::string name, std::int64_t in, std::int64_t out, ops::Pair kernel, Options options_)
    : Conv2d(in, out, kernel, options_) {
    parent.register_module(std::move(name), *this);
}

Tensor Conv2d::forward(const Tensor& x) {
    return ops::conv2d(x, weight(), bias ? (*bias)() : Tensor(), options.stride, options.padding, options.dilation,
                       options.groups);
}

}  // namespace levers::nn

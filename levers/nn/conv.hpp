// Convolution and pooling layers over images [N, C, H, W] (levers/kernels/conv.hpp),
// with PyTorch's parameter layouts and initialisation.
#pragma once

#include "levers/nn/module.hpp"
#include "levers/kernels/conv.hpp"

#include <cstdint>

namespace levers::nn {

// weight [out, in / groups, kh, kw] ~ U(±1/√fan_in), bias [out] alike
// (fan_in = in / groups · kh · kw), as nn.Conv2d.
class Conv2d : public Layer {
public:
    struct Options {
        ops::Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
        std::int64_t groups = 1;
        bool bias = true;
    };
    Conv2d(std::int64_t in, std::int64_t out, ops::Pair kernel, Options options);
    Conv2d(std::int64_t in, std::int64_t out, ops::Pair kernel) : Conv2d(in, out, kernel, Options{}) {}
    Conv2d(Module& parent, std::string name, std::int64_t in, std::int64_t out, ops::Pair kernel, Options options);
    Conv2d(Module& parent, std::string name, std::int64_t in, std::int64_t out, ops::Pair kernel)
        : Conv2d(parent, std::move(name), in, out, kernel, Options{}) {}
    Tensor forward(const Tensor& x) override;

    Parameter& weight;
    Parameter* bias = nullptr;
    Options options;
};

// The largest (MaxPool2d) or the mean (AvgPool2d) of each window; stride 0: the kernel's size.
class MaxPool2d : public Layer {
public:
    explicit MaxPool2d(ops::Pair kernel, ops::Pair stride = {0, 0}, ops::Pair padding = {0, 0})
        : kernel(kernel), stride(stride), padding(padding) {}
    MaxPool2d(Module& parent, std::string name, ops::Pair kernel, ops::Pair stride = {0, 0},
              ops::Pair padding = {0, 0})
        : MaxPool2d(kernel, stride, padding) {
        parent.register_module(std::move(name), *this);
    }
    Tensor forward(const Tensor& x) override { return ops::max_pool2d(x, kernel, stride, padding); }
    ops::Pair kernel, stride, padding;
};

class AvgPool2d : public Layer {
public:
    explicit AvgPool2d(ops::Pair kernel, ops::Pair stride = {0, 0}, ops::Pair padding = {0, 0})
        : kernel(kernel), stride(stride), padding(padding) {}
    AvgPool2d(Module& parent, std::string name, ops::Pair kernel, ops::Pair stride = {0, 0},
              ops::Pair padding = {0, 0})
        : AvgPool2d(kernel, stride, padding) {
        parent.register_module(std::move(name), *this);
    }
    Tensor forward(const Tensor& x) override { return ops::avg_pool2d(x, kernel, stride, padding); }
    ops::Pair kernel, stride, padding;
};

}  // namespace levers::nn

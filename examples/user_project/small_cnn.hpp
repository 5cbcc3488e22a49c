// A small CNN written by a user from levers' modules: two 3x3 convolutions
// (1 -> channels -> 2 x channels, padded), each followed by ReLU and 2x2 max
// pooling, then a linear head over the 7x7 maps. Takes [N, 784] images (or
// [N, 1, 28, 28]) and gives [N, 10] logits.
#pragma once

#include <levers/nn/nn.hpp>

namespace user {

using namespace levers;

struct SmallCnn : nn::Layer {
    nn::Conv2d conv1;
    nn::ReLU relu1;
    nn::MaxPool2d pool1;
    nn::Conv2d conv2;
    nn::ReLU relu2;
    nn::MaxPool2d pool2;
    nn::Flatten flatten;
    nn::Linear head;
    SmallCnn(std::int64_t channels, std::uint64_t seed)
        : conv1(*this, "conv1", 1, channels, {3, 3}, {.padding = {1, 1}}),
          relu1(*this, "relu1"),
          pool1(*this, "pool1", {2, 2}),
          conv2(*this, "conv2", channels, 2 * channels, {3, 3}, {.padding = {1, 1}}),
          relu2(*this, "relu2"),
          pool2(*this, "pool2", {2, 2}),
          flatten(*this, "flatten"),
          head(*this, "head", 2 * channels * 7 * 7, 10) {
        initialize(seed);
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = on_device(x).view({x.dim(0), 1, 28, 28});
        h = pool1(relu1(conv1(h)));
        h = pool2(relu2(conv2(h)));
        return head(flatten(h));
    }
};

}  // namespace user

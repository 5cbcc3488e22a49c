// A residual MLP written by a user from levers' modules, with layernorm:
// x -> in -> blocks of x + fc(gelu(norm(x))) -> norm -> out. Takes [N, 784]
// images and gives [N, 10] logits.
#pragma once

#include <levers/nn/nn.hpp>

namespace user {

using namespace levers;

struct Block : nn::Layer {
    nn::LayerNorm norm;
    nn::Linear fc;
    explicit Block(std::int64_t width) : norm(*this, "norm", width), fc(*this, "fc", width, width) {}
    Tensor forward(const Tensor& x) override { return x + fc(ops::gelu(norm(x))); }
};

struct ResidualMlp : nn::Layer {
    nn::Linear in;
    nn::ModuleList<Block> blocks;
    nn::LayerNorm norm;
    nn::Linear out;
    ResidualMlp(std::int64_t width, int depth, std::uint64_t seed)
        : in(*this, "in", 784, width), blocks(*this, "blocks", depth, width), norm(*this, "norm", width),
          out(*this, "out", width, 10) {
        initialize(seed);
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = in(on_device(x));
        for (Block& b : blocks) h = b(h);
        return out(norm(h));
    }
};

}  // namespace user

// Rotary position embeddings (Su et al.) in Hugging Face's layout: each head's
// first and second halves are the pairs rotated (rotate_half), frequency i
// of D/2 being theta^(-2i/D). No parameters; the cos and sin tables are
// made on first use for the positions asked (and kept, per device and dtype).
#pragma once

#include "framework/nn/module.hpp"

#include <cstdint>
#include <vector>

namespace levers::nn {

class RotaryEmbedding : public Module {
public:
    explicit RotaryEmbedding(std::int64_t head_dim, double theta = 10000.0);
    RotaryEmbedding(Module& parent, std::string name, std::int64_t head_dim, double theta = 10000.0);
    // x [..., T, H, D] (time at dimension -3, heads at -2: what a projection's
    // output is before the heads move forward) rotated by positions start,
    // start + 1, ...; differentiable in x.
    Tensor apply(const Tensor& x, std::int64_t start = 0);
    // The same at given positions: i32 [T] (every row alike) or [B, T] for x [B, T, H, D].
    Tensor apply(const Tensor& x, const Tensor& positions);

    const std::int64_t head_dim;
    const double theta;

private:
    // cos and sin [positions, D] for positions [0, length) in `like`'s dtype and device.
    void ensure(std::int64_t length, const Tensor& like);
    Tensor rotate(const Tensor& x, const Tensor& cos, const Tensor& sin) const;
    Tensor cos_, sin_;
};

}  // namespace levers::nn

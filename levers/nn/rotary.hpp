// Rotary position embeddings (Su et al.) in Hugging Face's layout: the first
// R of each head's D elements (R = D but for a partial rotation, Phi-4-mini's
// partial_rotary_factor) rotate as pairs (i, i + R/2) (rotate_half),
// frequency i of R/2 being theta^(-2i/R), or a rescaling of those
// (rope_scaling); the other D - R pass through. No parameters; the cos and
// sin tables are made on first use for the positions asked (and kept, per
// device and dtype).
#pragma once

#include "levers/nn/module.hpp"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace levers::nn {

// config.json's rope_scaling. llama3 (Llama 3.1, 3.2): wavelengths longer
// than original_max_position_embeddings / low_freq_factor are slowed by
// `factor`, those shorter than ... / high_freq_factor kept, those between
// blended. linear (Gemma 3's global layers): every frequency divided by
// `factor`. longrope (Phi-3, Phi-4-mini): frequency i divided by
// short_factor[i] while the positions asked stay within
// original_max_position_embeddings, by long_factor[i] beyond it, and cos and
// sin multiplied by attention_factor.
struct RopeScaling {
    enum class Kind { llama3, linear, longrope };
    Kind kind = Kind::llama3;
    double factor = 8, low_freq_factor = 1, high_freq_factor = 4;      // low/high: llama3 only
    std::int64_t original_max_position_embeddings = 8192;            // llama3 and longrope
    std::vector<double> short_factor, long_factor;                   // longrope: one per frequency
    double attention_factor = 1;                                     // longrope
};

class RotaryEmbedding : public Module {
public:
    // rotary_dim: the elements of a head that rotate (0: all of head_dim).
    explicit RotaryEmbedding(std::int64_t head_dim, double theta = 10000.0,
                             std::optional<RopeScaling> scaling = std::nullopt, std::int64_t rotary_dim = 0);
    RotaryEmbedding(Module& parent, std::string name, std::int64_t head_dim, double theta = 10000.0,
                    std::optional<RopeScaling> scaling = std::nullopt, std::int64_t rotary_dim = 0);
    // Where time and heads are in x, said by the caller (a shape cannot tell
    // [B, T, H, D] from [B, H, T, D]): time_heads, [..., T, H, D], a
    // projection's output split into heads; heads_time, [..., H, T, D], the
    // heads moved forward as attention's products take them.
    enum class Layout { time_heads, heads_time };
    // x rotated by positions start, start + 1, ... along its time dimension; differentiable in x.
    Tensor apply(const Tensor& x, Layout layout, std::int64_t start = 0);
    // The same at given positions: i32 [T] (every row alike) or [B, T] for a 4-d x.
    Tensor apply(const Tensor& x, Layout layout, const Tensor& positions);

    // The R/2 angular frequencies, in radians per position, for a call that
    // reaches `length` positions (longrope's factors depend on it).
    std::vector<double> inverse_frequencies(std::int64_t length = 0) const;
    // cos and sin [positions, R] for positions [0, length), in `like`'s dtype
    // and device (what fused kernels take; kept for the next call).
    std::pair<Tensor, Tensor> tables(std::int64_t length, const Tensor& like);

    const std::int64_t head_dim, rotary_dim;
    const double theta;
    const std::optional<RopeScaling> scaling;

private:
    bool long_factors(std::int64_t length) const;  // longrope past its original length
    void ensure(std::int64_t length, const Tensor& like);
    Tensor apply_time_heads(const Tensor& x, std::int64_t start);
    Tensor apply_time_heads(const Tensor& x, const Tensor& positions);
    // x's rotating part turned by the table rows cos and sin ([T, R] or [B, T, R]), the rest passed through.
    Tensor turn(const Tensor& x, const Tensor& cos, const Tensor& sin) const;
    // The general-op form (the fused kernel's reference), for x of other ranks than [B, T, H, D].
    Tensor rotate(const Tensor& x, const Tensor& cos, const Tensor& sin) const;
    Tensor cos_, sin_;
    bool long_ = false;  // the tables are longrope's long ones
};

}  // namespace levers::nn

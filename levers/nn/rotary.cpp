#include "levers/nn/rotary.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/rope.hpp"

#include <algorithm>
#include <cmath>

namespace levers::nn {

RotaryEmbedding::RotaryEmbedding(std::int64_t head_dim_, double theta_, std::optional<RopeScaling> scaling_,
                                 std::int64_t rotary_dim_)
    : head_dim(head_dim_), rotary_dim(rotary_dim_ > 0 ? rotary_dim_ : head_dim_), theta(theta_), scaling(scaling_) {
    LEVERS_CHECK(rotary_dim_ > 0 || (head_dim >= 2 && head_dim % 2 == 0),
                 "RotaryEmbedding: the head size must be even, got {}", head_dim);
    LEVERS_CHECK(rotary_dim >= 2 && rotary_dim % 2 == 0 && rotary_dim <= head_dim,
                 "RotaryEmbedding: the rotating part of a head must be even, 2 to {} elements, got {}", head_dim,
                 rotary_dim);
    LEVERS_CHECK(theta > 0, "RotaryEmbedding: theta must be positive, got {}", theta);
    if (scaling && scaling->kind == RopeScaling::Kind::llama3)
        LEVERS_CHECK(scaling->factor > 0 && scaling->low_freq_factor > 0 &&
                         scaling->high_freq_factor > scaling->low_freq_factor &&
                         scaling->original_max_position_embeddings > 0,
                     "RotaryEmbedding: llama3 scaling needs a positive factor, 0 < low_freq_factor < "
                     "high_freq_factor and a positive original length");
    if (scaling && scaling->kind == RopeScaling::Kind::longrope) {
        const auto n = static_cast<std::size_t>(rotary_dim / 2);
        LEVERS_CHECK(scaling->short_factor.size() == n && scaling->long_factor.size() == n,
                     "RotaryEmbedding: longrope needs {} short and long factors (one per frequency), got {} and {}", n,
                     scaling->short_factor.size(), scaling->long_factor.size());
        for (const auto* factors : {&scaling->short_factor, &scaling->long_factor})
            for (double v : *factors) LEVERS_CHECK(v > 0, "RotaryEmbedding: longrope factor {} must be positive", v);
        LEVERS_CHECK(scaling->attention_factor > 0 && scaling->original_max_position_embeddings > 0,
                     "RotaryEmbedding: longrope needs a positive attention_factor and original length");
    }
    if (scaling) LEVERS_CHECK(scaling->factor > 0, "RotaryEmbedding: scaling's factor must be positive");
}

RotaryEmbedding::RotaryEmbedding(Module& parent, std::string name, std::int64_t head_dim_, double theta_,
                                 std::optional<RopeScaling> scaling_, std::int64_t rotary_dim_)
    : RotaryEmbedding(head_dim_, theta_, scaling_, rotary_dim_) {
    parent.register_module(std::move(name), *this);
}

bool RotaryEmbedding::long_factors(std::int64_t length) const {
    return scaling && scaling->kind == RopeScaling::Kind::longrope && length > scaling->original_max_position_embeddings;
}

std::vector<double> RotaryEmbedding::inverse_frequencies(std::int64_t length) const {
    std::vector<double> inv(static_cast<std::size_t>(rotary_dim / 2));
    for (std::size_t i = 0; i < inv.size(); ++i)
        inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    if (!scaling) return inv;
    const RopeScaling& s = *scaling;
    if (s.kind == RopeScaling::Kind::linear) {  // positions divided by the factor (Gemma 3's global layers)
        for (double& f : inv) f /= s.factor;
        return inv;
    }
    if (s.kind == RopeScaling::Kind::longrope) {  // the short factors, or the long ones past the original length
        const std::vector<double>& by = long_factors(length) ? s.long_factor : s.short_factor;
        for (std::size_t i = 0; i < inv.size(); ++i) inv[i] /= by[i];
        return inv;
    }
    const double old = static_cast<double>(s.original_max_position_embeddings);
    const double long_wave = old / s.low_freq_factor, short_wave = old / s.high_freq_factor;
    for (double& f : inv) {
        const double wavelength = 2 * M_PI / f;
        if (wavelength > long_wave) {
            f /= s.factor;
        } else if (wavelength >= short_wave) {  // between: blended by where the wavelength falls
            const double smooth = (old / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
            f = (1 - smooth) * f / s.factor + smooth * f;
        }
    }
    return inv;
}

std::pair<Tensor, Tensor> RotaryEmbedding::tables(std::int64_t length, const Tensor& like) {
    ensure(length, like);
    return {cos_.narrow(0, 0, length), sin_.narrow(0, 0, length)};
}

void RotaryEmbedding::ensure(std::int64_t length, const Tensor& like) {
    // longrope's tables depend on the length reached: a call within the original length turns its positions by the
    // short factors, one beyond it by the long ones (as transformers chooses per forward, from the highest position).
    const bool long_wanted = long_factors(length);
    if (cos_.defined() && cos_.dim(0) >= length && cos_.device() == like.device() && cos_.dtype() == like.dtype() &&
        long_ == long_wanted)
        return;
    // In double on the host, then once to the device: a table made in bf16 arithmetic would drift with the position.
    const std::int64_t n = std::max<std::int64_t>(length, cos_.defined() ? cos_.dim(0) : 0);
    const std::int64_t half = rotary_dim / 2;
    const std::vector<double> inv = inverse_frequencies(length);
    const double amplitude = scaling && scaling->kind == RopeScaling::Kind::longrope ? scaling->attention_factor : 1.0;
    std::vector<double> c(static_cast<std::size_t>(n * rotary_dim)), s(c.size());
    for (std::int64_t p = 0; p < n; ++p)
        for (std::int64_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(p) * inv[static_cast<std::size_t>(i)];
            for (const std::int64_t at : {p * rotary_dim + i, p * rotary_dim + i + half}) {
                c[static_cast<std::size_t>(at)] = amplitude * std::cos(angle);
                s[static_cast<std::size_t>(at)] = amplitude * std::sin(angle);
            }
        }
    cos_ = Tensor::from(c, {n, rotary_dim}).to(like.device(), like.dtype());
    sin_ = Tensor::from(s, {n, rotary_dim}).to(like.device(), like.dtype());
    long_ = long_wanted;
}

Tensor RotaryEmbedding::rotate(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
    // rotate_half(x) = [-x2, x1] for x = [x1, x2] along the rotating part.
    const std::int64_t half = x.dim(-1) / 2;
    const Tensor rotated = ops::cat({ops::neg(x.narrow(-1, half, half)), x.narrow(-1, 0, half)}, -1);
    return x * cos + rotated * sin;
}

Tensor RotaryEmbedding::turn(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
    const bool partial = rotary_dim < head_dim;
    const Tensor part = partial ? x.narrow(-1, 0, rotary_dim) : x;
    // [B, T, H, D]: the fused kernel; other ranks: a heads dimension of 1 in the tables.
    const Tensor turned = x.ndim() == 4 ? ops::rope(part, cos, sin) : rotate(part, cos.unsqueeze(-2), sin.unsqueeze(-2));
    return partial ? ops::cat({turned, x.narrow(-1, rotary_dim, head_dim - rotary_dim)}, -1) : turned;
}

Tensor RotaryEmbedding::apply(const Tensor& x, Layout layout, std::int64_t start) {
    if (layout == Layout::time_heads) return apply_time_heads(x, start);
    LEVERS_CHECK(x.ndim() >= 3, "RotaryEmbedding: x is {}, expected [..., heads, time, {}]", x.shape().str(), head_dim);
    return apply_time_heads(x.transpose(-3, -2), start).transpose(-3, -2);
}

Tensor RotaryEmbedding::apply(const Tensor& x, Layout layout, const Tensor& positions) {
    if (layout == Layout::time_heads) return apply_time_heads(x, positions);
    LEVERS_CHECK(x.ndim() >= 3, "RotaryEmbedding: x is {}, expected [..., heads, time, {}]", x.shape().str(), head_dim);
    return apply_time_heads(x.transpose(-3, -2), positions).transpose(-3, -2);
}

Tensor RotaryEmbedding::apply_time_heads(const Tensor& x, std::int64_t start) {
    LEVERS_CHECK(x.ndim() >= 3 && x.dim(-1) == head_dim,
                 "RotaryEmbedding: x is {}, expected [..., time, heads, {}]", x.shape().str(), head_dim);
    LEVERS_CHECK(start >= 0, "RotaryEmbedding: the first position must be >= 0, got {}", start);
    const std::int64_t time = x.dim(-3);
    ensure(start + time, x);
    return turn(x, cos_.narrow(0, start, time), sin_.narrow(0, start, time));
}

Tensor RotaryEmbedding::apply_time_heads(const Tensor& x, const Tensor& positions) {
    LEVERS_CHECK(x.ndim() >= 3 && x.dim(-1) == head_dim,
                 "RotaryEmbedding: x is {}, expected [..., time, heads, {}]", x.shape().str(), head_dim);
    LEVERS_CHECK(positions.dtype() == DType::i32 && positions.ndim() >= 1 && positions.dim(-1) == x.dim(-3) &&
                     (positions.ndim() == 1 || (positions.ndim() == 2 && x.ndim() == 4 && positions.dim(0) == x.dim(0))),
                 "RotaryEmbedding: positions are {} {}, expected i32 [{}] or [batch, {}] for x {}",
                 name_of(positions.dtype()), positions.shape().str(), x.dim(-3), x.dim(-3), x.shape().str());
    const Tensor host = positions.to(Device::cpu()).contiguous();
    std::int32_t last = 0;
    for (std::int64_t i = 0; i < host.numel(); ++i) {
        LEVERS_CHECK(host.data<std::int32_t>()[i] >= 0, "RotaryEmbedding: position {} is negative",
                     host.data<std::int32_t>()[i]);
        last = std::max(last, host.data<std::int32_t>()[i]);
    }
    ensure(last + 1, x);
    const Tensor flat = positions.reshape({-1}).to(x.device());
    // [T, R] or [B, T, R] rows of the tables.
    Shape rows = positions.shape().appended(rotary_dim);
    return turn(x, ops::index_select(cos_, 0, flat).view(rows), ops::index_select(sin_, 0, flat).view(rows));
}

}  // namespace levers::nn

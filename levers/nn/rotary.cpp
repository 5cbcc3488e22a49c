#include "levers/nn/rotary.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/rope.hpp"

#include <algorithm>
#include <cmath>

namespace levers::nn {

RotaryEmbedding::RotaryEmbedding(std::int64_t head_dim_, double theta_, std::optional<RopeScaling> scaling_)
    : head_dim(head_dim_), theta(theta_), scaling(scaling_) {
    LEVERS_CHECK(head_dim >= 2 && head_dim % 2 == 0, "RotaryEmbedding: the head size must be even, got {}", head_dim);
    LEVERS_CHECK(theta > 0, "RotaryEmbedding: theta must be positive, got {}", theta);
    if (scaling && scaling->kind == RopeScaling::Kind::llama3)
        LEVERS_CHECK(scaling->factor > 0 && scaling->low_freq_factor > 0 &&
                         scaling->high_freq_factor > scaling->low_freq_factor &&
                         scaling->original_max_position_embeddings > 0,
                     "RotaryEmbedding: llama3 scaling needs a positive factor, 0 < low_freq_factor < "
                     "high_freq_factor and a positive original length");
    if (scaling) LEVERS_CHECK(scaling->factor > 0, "RotaryEmbedding: scaling's factor must be positive");
}

RotaryEmbedding::RotaryEmbedding(Module& parent, std::string name, std::int64_t head_dim_, double theta_,
                                 std::optional<RopeScaling> scaling_)
    : RotaryEmbedding(head_dim_, theta_, scaling_) {
    parent.register_module(std::move(name), *this);
}

std::vector<double> RotaryEmbedding::inverse_frequencies() const {
    std::vector<double> inv(static_cast<std::size_t>(head_dim / 2));
    for (std::size_t i = 0; i < inv.size(); ++i)
        inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (!scaling) return inv;
    const RopeScaling& s = *scaling;
    if (s.kind == RopeScaling::Kind::linear) {  // positions divided by the factor (Gemma 3's global layers)
        for (double& f : inv) f /= s.factor;
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
    if (cos_.defined() && cos_.dim(0) >= length && cos_.device() == like.device() && cos_.dtype() == like.dtype()) return;
    // In double on the host, then once to the device: a table made in bf16 arithmetic would drift with the position.
    const std::int64_t n = std::max<std::int64_t>(length, cos_.defined() ? cos_.dim(0) : 0);
    const std::int64_t half = head_dim / 2;
    const std::vector<double> inv = inverse_frequencies();
    std::vector<double> c(static_cast<std::size_t>(n * head_dim)), s(c.size());
    for (std::int64_t p = 0; p < n; ++p)
        for (std::int64_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(p) * inv[static_cast<std::size_t>(i)];
            for (const std::int64_t at : {p * head_dim + i, p * head_dim + i + half}) {
                c[static_cast<std::size_t>(at)] = std::cos(angle);
                s[static_cast<std::size_t>(at)] = std::sin(angle);
            }
        }
    cos_ = Tensor::from(c, {n, head_dim}).to(like.device(), like.dtype());
    sin_ = Tensor::from(s, {n, head_dim}).to(like.device(), like.dtype());
}

Tensor RotaryEmbedding::rotate(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
    // rotate_half(x) = [-x2, x1] for x = [x1, x2] along the head.
    const std::int64_t half = head_dim / 2;
    const Tensor rotated = ops::cat({ops::neg(x.narrow(-1, half, half)), x.narrow(-1, 0, half)}, -1);
    return x * cos + rotated * sin;
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
    const Tensor cos = cos_.narrow(0, start, time), sin = sin_.narrow(0, start, time);
    if (x.ndim() == 4) return ops::rope(x, cos, sin);  // the fused kernel
    // [T, 1, D]: the same rotation for every head.
    return rotate(x, cos.unsqueeze(1), sin.unsqueeze(1));
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
    // [T, D] or [B, T, D] rows of the tables.
    Shape rows = positions.shape().appended(head_dim);
    const Tensor cos = ops::index_select(cos_, 0, flat).view(rows);
    const Tensor sin = ops::index_select(sin_, 0, flat).view(rows);
    if (x.ndim() == 4) return ops::rope(x, cos, sin);  // the fused kernel
    return rotate(x, cos.unsqueeze(-2), sin.unsqueeze(-2));  // a heads dimension of 1
}

}  // namespace levers::nn

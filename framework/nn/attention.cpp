#include "framework/nn/attention.hpp"

#include "kernels/elementwise.hpp"
#include "kernels/flash_attention.hpp"
#include "kernels/indexing.hpp"
#include "kernels/matmul.hpp"
#include "kernels/softmax.hpp"

#include <cmath>
#include <limits>

namespace levers::nn {

CausalSelfAttention::CausalSelfAttention(std::int64_t channels, std::int64_t heads_, Init proj_init, Init qkv_init)
    : c_attn(*this, "c_attn", channels, 3 * channels, true, qkv_init),
      c_proj(*this, "c_proj", channels, channels, true, proj_init),
      heads(heads_) {
    LEVERS_CHECK(heads >= 1 && channels % heads == 0, "attention: {} channels do not split into {} heads", channels,
                 heads);
}

CausalSelfAttention::CausalSelfAttention(Module& parent, std::string name, std::int64_t channels, std::int64_t heads_,
                                         Init proj_init, Init qkv_init)
    : CausalSelfAttention(channels, heads_, proj_init, qkv_init) {
    parent.register_module(std::move(name), *this);
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
    const Tensor qkv = c_attn(x);
    const std::int64_t channels = c_attn.in_features();
    const Tensor y = ops::flash_attention_applies(qkv.device(), qkv.dtype(), channels, heads)
                         ? ops::flash_attention(qkv, heads)
                         : ops::attention(qkv, heads);
    return c_proj(y);
}

namespace {
Attention::Options checked(std::int64_t dim, std::int64_t heads, Attention::Options o) {
    LEVERS_CHECK(heads >= 1, "Attention: {} heads; at least 1 is needed", heads);
    if (o.kv_heads == 0) o.kv_heads = heads;
    if (o.head_dim == 0) {
        LEVERS_CHECK(dim % heads == 0, "Attention: {} channels do not split into {} heads", dim, heads);
        o.head_dim = dim / heads;
    }
    LEVERS_CHECK(o.kv_heads >= 1 && heads % o.kv_heads == 0,
                 "Attention: {} query heads do not share {} key-value heads evenly", heads, o.kv_heads);
    return o;
}
}  // namespace

Attention::Attention(std::int64_t dim, std::int64_t heads_, Options options)
    : Attention(dim, heads_, checked(dim, heads_, options), Checked{}) {}

Attention::Attention(std::int64_t dim, std::int64_t heads_, Options o, Checked)
    : q_proj(*this, "q_proj", dim, heads_ * o.head_dim, o.bias),
      k_proj(*this, "k_proj", dim, o.kv_heads * o.head_dim, o.bias),
      v_proj(*this, "v_proj", dim, o.kv_heads * o.head_dim, o.bias),
      o_proj(*this, "o_proj", heads_ * o.head_dim, dim, false),
      heads(heads_),
      kv_heads(o.kv_heads),
      head_dim(o.head_dim),
      causal(o.causal) {
    if (o.rope_theta > 0) {
        rotary = std::make_unique<RotaryEmbedding>(head_dim, o.rope_theta);
        register_module("rotary", *rotary);
    }
}

Attention::Attention(Module& parent, std::string name, std::int64_t dim, std::int64_t heads_, Options o)
    : Attention(dim, heads_, o) {
    parent.register_module(std::move(name), *this);
}

Tensor Attention::forward(const Tensor& x) { return attend(x, nullptr); }
Tensor Attention::forward(const Tensor& x, const Tensor& mask) { return attend(x, &mask); }

Tensor Attention::attend(const Tensor& x, const Tensor* mask) {
    LEVERS_CHECK(x.ndim() == 3, "Attention: x is {}, expected [batch, time, channels]", x.shape().str());
    const std::int64_t batch = x.dim(0), time = x.dim(1), width = heads * head_dim;
    // [B, T, heads, D]: the heads side by side, as the projections make them.
    Tensor q = q_proj(x).view({batch, time, heads, head_dim});
    Tensor k = k_proj(x).view({batch, time, kv_heads, head_dim});
    const Tensor v = v_proj(x).view({batch, time, kv_heads, head_dim});
    if (rotary) {
        q = rotary->apply(q);
        k = rotary->apply(k);
    }
    // The packed kernels where they apply: causal, no mask, a key-value head per query head.
    if (causal && !mask && kv_heads == heads) {
        const Tensor qkv = ops::cat({q.reshape({batch, time, width}), k.reshape({batch, time, width}),
                                     v.reshape({batch, time, width})},
                                    -1);
        const Tensor y = ops::flash_attention_applies(qkv.device(), qkv.dtype(), width, heads)
                             ? ops::flash_attention(qkv, heads)
                             : ops::attention(qkv, heads);
        return o_proj(y);
    }
    // Written out: [B, heads, T, D] each, the key-value heads repeated for their query heads.
    const std::int64_t group = heads / kv_heads;
    const Tensor qh = q.transpose(1, 2);
    const Tensor kh = ops::repeat_interleave(k.transpose(1, 2), group, 1);
    const Tensor vh = ops::repeat_interleave(v.transpose(1, 2), group, 1);
    Tensor scores = ops::matmul(qh, kh.mT()) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
    const double blocked = -std::numeric_limits<double>::infinity();
    if (causal) {
        // A key after the query is out of reach: column > row.
        const Tensor rows = ops::arange(time, DType::i32, x.device()).unsqueeze(1);
        const Tensor cols = ops::arange(time, DType::i32, x.device()).unsqueeze(0);
        scores = ops::masked_fill(scores, cols > rows, blocked);
    }
    if (mask) scores = ops::masked_fill(scores, ~*mask, blocked);
    const Tensor y = ops::matmul(ops::softmax(scores, -1), vh);
    return o_proj(y.transpose(1, 2).reshape({batch, time, width}));
}

}  // namespace levers::nn

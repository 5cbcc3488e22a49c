#include "framework/nn/attention.hpp"

#include "kernels/flash_attention.hpp"

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

}  // namespace levers::nn

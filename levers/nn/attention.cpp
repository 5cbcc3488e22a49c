#include "levers/nn/attention.hpp"

#include "levers/kernels/attention.hpp"
#include "levers/kernels/causal_attention.hpp"
#include "levers/kernels/flash_attention.hpp"
#include "levers/kernels/indexing.hpp"

#include <cmath>
#include <vector>

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
    LEVERS_CHECK(o.sliding_window >= 0 && (o.sliding_window == 0 || o.causal),
                 "Attention: a sliding window ({}) needs causal attention and must be >= 0", o.sliding_window);
    LEVERS_CHECK(!o.rope_scaling || o.rope_theta > 0, "Attention: rope_scaling needs rotary embeddings (rope_theta > 0)");
    LEVERS_CHECK(o.scale >= 0 && o.logit_softcap >= 0, "Attention: scale ({}) and logit_softcap ({}) must be >= 0 "
                 "(0: none)", o.scale, o.logit_softcap);
    return o;
}
}  // namespace

Attention::Attention(std::int64_t dim, std::int64_t heads_, Options options)
    : Attention(dim, heads_, checked(dim, heads_, options), Checked{}) {}

Attention::Attention(std::int64_t dim, std::int64_t heads_, Options o, Checked)
    : q_proj(optional_linear(*this, !o.fused_qkv, "q_proj", dim, heads_ * o.head_dim, o.bias, o.init)),
      k_proj(optional_linear(*this, !o.fused_qkv, "k_proj", dim, o.kv_heads * o.head_dim, o.bias, o.init)),
      v_proj(optional_linear(*this, !o.fused_qkv, "v_proj", dim, o.kv_heads * o.head_dim, o.bias, o.init)),
      qkv_proj(optional_linear(*this, o.fused_qkv, "qkv_proj", dim, (heads_ + 2 * o.kv_heads) * o.head_dim, o.bias,
                               o.init)),
      o_proj(*this, "o_proj", heads_ * o.head_dim, dim, false, o.init),
      heads(heads_),
      kv_heads(o.kv_heads),
      head_dim(o.head_dim),
      sliding_window(o.sliding_window),
      causal(o.causal),
      query_factor(o.scale > 0 ? o.scale * std::sqrt(static_cast<double>(o.head_dim)) : 1.0),
      logit_softcap(o.logit_softcap) {
    if (o.qk_norm_eps > 0) {
        q_norm = std::make_unique<RMSNorm>(*this, "q_norm", head_dim, o.qk_norm_eps, o.qk_norm_offset);
        k_norm = std::make_unique<RMSNorm>(*this, "k_norm", head_dim, o.qk_norm_eps, o.qk_norm_offset);
    }
    if (o.rope_theta > 0) {
        rotary = std::make_unique<RotaryEmbedding>(head_dim, o.rope_theta, o.rope_scaling, o.rotary_dim);
        register_module("rotary", *rotary);
    }
}

Attention::Attention(Module& parent, std::string name, std::int64_t dim, std::int64_t heads_, Options o)
    : Attention(dim, heads_, o) {
    parent.register_module(std::move(name), *this);
}

Tensor Attention::forward(const Tensor& x) { return attend(x, nullptr, nullptr); }
Tensor Attention::forward(const Tensor& x, const Tensor& mask) { return attend(x, &mask, nullptr); }
Tensor Attention::forward(const Tensor& x, KvCache& cache) { return attend(x, nullptr, &cache); }
Tensor Attention::forward(const Tensor& x, KvCache& cache, const Tensor& starts) {
    LEVERS_CHECK(causal && starts.dtype() == DType::i32 && starts.ndim() == 2 && starts.dim(0) == x.dim(0) &&
                     starts.dim(1) == x.dim(1),
                 "Attention: starts are {} {}; x {} needs i32 [{}, {}] (causal attention only)",
                 name_of(starts.dtype()), starts.shape().str(), x.shape().str(), x.dim(0), x.dim(1));
    return attend(x, nullptr, &cache, nullptr, &starts);
}

namespace {

// Packed rows: each position's place in its document (its rotary position,
// on the host) and its document's first position (on `device`), from
// `documents` [B, T] (i32, non-decreasing along each row).
Attention::Packed pack(const Tensor& documents, Device device) {
    const Tensor docs = documents.to(Device::cpu()).contiguous();
    const std::int32_t* d = docs.data<std::int32_t>();
    std::vector<std::int32_t> positions(static_cast<std::size_t>(docs.numel())), starts(positions.size());
    for (std::int64_t b = 0; b < docs.dim(0); ++b)
        for (std::int64_t t = 0; t < docs.dim(1); ++t) {
            const auto i = static_cast<std::size_t>(b * docs.dim(1) + t);
            LEVERS_CHECK(t == 0 || d[i] >= d[i - 1], "Attention: documents must not decrease along a row; row {} "
                         "goes from {} to {} at position {}", b, d[i - 1], d[i], t);
            const bool first = t == 0 || d[i] != d[i - 1];
            positions[i] = first ? 0 : positions[i - 1] + 1;
            starts[i] = static_cast<std::int32_t>(t) - positions[i];
        }
    return {Tensor::from(positions, docs.shape()), Tensor::from(starts, docs.shape()).to(device)};
}

}  // namespace

Tensor Attention::forward_packed(const Tensor& x, const Tensor& documents) {
    LEVERS_CHECK(x.ndim() == 3 && documents.dtype() == DType::i32 && documents.ndim() == 2 &&
                     documents.dim(0) == x.dim(0) && documents.dim(1) == x.dim(1),
                 "Attention: documents are {} {}; x {} needs i32 [{}, {}]", name_of(documents.dtype()),
                 documents.shape().str(), x.shape().str(), x.dim(0), x.dim(1));
    const Packed packed = pack(documents, x.device());
    return attend(x, nullptr, nullptr, &packed);
}

std::pair<Tensor, Tensor> KvCache::append(const Tensor& k, const Tensor& v) {
    LEVERS_CHECK(!autograd::grad_enabled(), "Attention: a KV cache is for generation, under autograd::InferenceMode");
    const std::int64_t batch = k.dim(0), time = k.dim(1);
    LEVERS_CHECK(length + time <= capacity, "Attention: the KV cache holds {} positions; {} + {} asked", capacity,
                 length, time);
    if (!keys.defined() || keys.dim(0) != batch) {
        LEVERS_CHECK(length == 0, "Attention: a KV cache of batch {} fed a batch of {}",
                     keys.defined() ? keys.dim(0) : 0, batch);
        keys = Tensor::empty({batch, capacity, k.dim(2), k.dim(3)}, k.dtype(), k.device());
        values = Tensor::empty({batch, capacity, v.dim(2), v.dim(3)}, v.dtype(), v.device());
    }
    keys.narrow(1, length, time).copy_from(k);
    values.narrow(1, length, time).copy_from(v);
    length += time;
    return {keys.narrow(1, 0, length), values.narrow(1, 0, length)};
}

void KvCache::keep_rows(const Tensor& rows) {
    LEVERS_CHECK(!autograd::grad_enabled(), "Attention: a KV cache is for generation, under autograd::InferenceMode");
    if (!keys.defined()) return;
    const Tensor index = rows.to(keys.device());
    keys = ops::index_select(keys, 0, index).contiguous();
    values = ops::index_select(values, 0, index).contiguous();
}

Attention::Heads Attention::project(const Tensor& x, std::int64_t start, const Packed* packed) {
    const std::int64_t batch = x.dim(0), time = x.dim(1);
    // [B, T, heads, D]: the heads side by side, as the projections make them.
    Heads h;
    if (qkv_proj) {  // q, k and v side by side in one product's rows
        const Tensor qkv = (*qkv_proj)(x);
        const std::int64_t q = heads * head_dim, kv = kv_heads * head_dim;
        h = {qkv.narrow(-1, 0, q).reshape({batch, time, heads, head_dim}),
             qkv.narrow(-1, q, kv).reshape({batch, time, kv_heads, head_dim}),
             qkv.narrow(-1, q + kv, kv).reshape({batch, time, kv_heads, head_dim})};
    } else {
        h = {(*q_proj)(x).view({batch, time, heads, head_dim}), (*k_proj)(x).view({batch, time, kv_heads, head_dim}),
             (*v_proj)(x).view({batch, time, kv_heads, head_dim})};
    }
    if (q_norm) {
        h.q = (*q_norm)(h.q);
        h.k = (*k_norm)(h.k);
    }
    if (rotary) {
        const auto layout = RotaryEmbedding::Layout::time_heads;
        h.q = packed ? rotary->apply(h.q, layout, packed->positions) : rotary->apply(h.q, layout, start);
        h.k = packed ? rotary->apply(h.k, layout, packed->positions) : rotary->apply(h.k, layout, start);
    }
    // A scale of its own as q's factor: every kernel below divides by sqrt(head_dim).
    if (query_factor != 1.0) h.q = h.q * query_factor;
    return h;
}

Tensor Attention::mix(const Heads& h, const Tensor* mask, bool cached, const Tensor* starts) {
    const std::int64_t batch = h.q.dim(0), time = h.q.dim(1), width = heads * head_dim;
    const ops::CausalMask reach{.starts = starts ? *starts : Tensor(), .window = sliding_window};
    // The fused kernel where it applies (causal, no mask of the caller's, no soft cap).
    if (causal && !mask && logit_softcap == 0 && ops::causal_attention_applies(h.q.device(), h.q.dtype(), head_dim))
        return ops::causal_attention(h.q, h.k, h.v, reach).reshape({batch, time, width});
    // Else GPT-2's packed op where it applies (nothing but causality, a key-value head per query head): GPUs
    // in f32, or other head sizes (GPT-2's flash kernel applies only where the fused one above already did).
    if (causal && !mask && !cached && !starts && sliding_window == 0 && kv_heads == heads && logit_softcap == 0)
        return ops::attention(ops::cat({h.q.reshape({batch, time, width}), h.k.reshape({batch, time, width}),
                                        h.v.reshape({batch, time, width})},
                                       -1),
                              heads);
    return ops::attention_written_out(h.q, h.k, h.v, reach, causal, mask, logit_softcap).reshape({batch, time, width});
}

Tensor Attention::attend(const Tensor& x, const Tensor* mask, KvCache* cache, const Packed* packed,
                         const Tensor* starts) {
    LEVERS_CHECK(x.ndim() == 3, "Attention: x is {}, expected [batch, time, channels]", x.shape().str());
    Heads h = project(x, cache ? cache->length : 0, packed);
    if (cache) std::tie(h.k, h.v) = cache->append(h.k, h.v);
    const Tensor* reach = packed ? &packed->starts : starts;
    return o_proj(mix(h, mask, cache != nullptr, reach));
}

}  // namespace levers::nn

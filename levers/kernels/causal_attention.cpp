#include "levers/kernels/causal_attention.hpp"

#include "levers/core/environment.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/matmul.hpp"
#include "levers/kernels/op.hpp"
#include "levers/kernels/softmax.hpp"

#include <cmath>
#include <limits>
#include <string>

namespace levers::ops {

namespace {

constexpr const char* kOp = "causal_attention";

// The kernels read each position's heads as one contiguous run: a view whose
// rows lie apart (a KV cache's prefix) stays as it is, anything else is copied.
Tensor heads_dense(const Tensor& t) {
    return t.stride(3) == 1 && t.stride(2) == t.dim(3) ? t : t.contiguous();
}

// q [B, T, H, D], k and v [B, S, KVH, D] with S ≥ T and KVH dividing H.
void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
    check_float(kOp, "q", q);
    check_like(kOp, "k", k, "q", q);
    check_like(kOp, "v", v, "q", q);
    LEVERS_CHECK(q.ndim() == 4, "{}: 'q' is {}, expected [batch, time, heads, head_dim]", kOp, describe(q));
    LEVERS_CHECK(k.ndim() == 4 && k.dim(0) == q.dim(0) && k.dim(3) == q.dim(3) && k.dim(1) >= q.dim(1),
                 "{}: 'k' is {}; 'q' {} needs [{}, S >= {}, kv_heads, {}]", kOp, describe(k), q.shape().str(),
                 q.dim(0), q.dim(1), q.dim(3));
    check_shape(kOp, "v", v, k.shape(), [&] { return fmt::format("'k' is {}", k.shape().str()); });
    LEVERS_CHECK(k.dim(2) >= 1 && q.dim(2) % k.dim(2) == 0,
                 "{}: {} query heads do not share {} key-value heads evenly", kOp, q.dim(2), k.dim(2));
}

// starts: i32 [B, T] on q's device; on the host, also non-decreasing and
// within reach (0 ≤ starts ≤ the query's position).
void check_starts(const Tensor& starts, const Tensor& q, std::int64_t keys) {
    check_dtype(kOp, "starts", starts, DType::i32);
    LEVERS_CHECK(starts.device() == q.device(), "{}: 'starts' is {}; q is on {}", kOp, describe(starts),
                 q.device().str());
    check_shape(kOp, "starts", starts, {q.dim(0), q.dim(1)},
                [&] { return fmt::format("'q' {} needs [{}, {}]", q.shape().str(), q.dim(0), q.dim(1)); });
    if (!starts.device().is_cpu()) return;
    const std::int32_t* s = starts.data<std::int32_t>();
    const std::int64_t time = q.dim(1);
    for (std::int64_t b = 0; b < q.dim(0); ++b)
        for (std::int64_t t = 0; t < time; ++t) {
            const std::int64_t at = s[b * time + t], position = keys - time + t;
            LEVERS_CHECK(at >= 0 && at <= position && (t == 0 || at >= s[b * time + t - 1]),
                         "{}: 'starts' row {} holds {} at query {}: starts must be within 0..{} (the query's "
                         "position) and must not decrease along a row",
                         kOp, b, at, t, position);
        }
}

}  // namespace

bool fused_attention_turned_off() {
    const char* fused = env::get("LEVERS_FUSED_ATTENTION");
    return fused && std::string(fused) == "0";
}

bool causal_attention_applies(Device device, DType dtype, std::int64_t head_dim) {
    if (fused_attention_turned_off()) return false;
    if (!has_kernel("causal_attention", device.kind, dtype)) return false;
    return device.is_cpu() || head_dim == 64 || head_dim == 128;
}

Tensor causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const CausalMask& mask) {
    check_qkv(q_in, k_in, v_in);
    LEVERS_CHECK(mask.window >= 0, "{}: window {} must be >= 0 (0: none)", kOp, mask.window);
    const Tensor q = heads_dense(q_in), k = heads_dense(k_in), v = heads_dense(v_in);
    const Tensor starts = dense(mask.starts);
    if (starts.defined()) check_starts(starts, q, k.dim(1));
    const std::int64_t batch = q.dim(0), time = q.dim(1), heads = q.dim(2);
    Tensor y = Tensor::empty(q.shape(), q.dtype(), q.device());
    Tensor lse = Tensor::empty({batch, heads, time}, accumulator(q.dtype()), q.device());
    CausalAttentionCall call{.y = arg(y), .lse = arg(lse), .q = strided(q), .k = strided(k), .v = strided(v),
                             .starts = arg(starts), .window = mask.window};
    run(q, call);
    struct Saved {
        autograd::SavedTensor q, k, v, y, lse, starts;
        std::int64_t window;
    };
    if (auto* s = autograd::record<Saved>(
            "causal_attention",
            [](autograd::Backward& g, const Saved& s) {
                CausalAttentionBackwardCall call{
                    .d_q = arg(g.write_grad_or_scratch(0)), .d_k = arg(g.write_grad_or_scratch(1)),
                    .d_v = arg(g.write_grad_or_scratch(2)), .d_y = arg(g.grad_out().contiguous()),
                    .y = arg(s.y), .lse = arg(s.lse), .q = strided(s.q), .k = strided(s.k), .v = strided(s.v),
                    .starts = arg(s.starts), .window = s.window};
                run(s.q.get(), call);
            },
            {&q, &k, &v}, {&y}))
        *s = {.q = q, .k = k, .v = v, .y = y, .lse = lse, .starts = starts, .window = mask.window};
    return y;
}

Tensor attention_written_out(const Tensor& q, const Tensor& k, const Tensor& v, const CausalMask& causal_mask,
                             bool causal, const Tensor* mask, double softcap) {
    check_qkv(q, k, v);
    LEVERS_CHECK(causal || (causal_mask.window == 0 && !causal_mask.starts.defined()),
                 "attention: a window or document starts need causal attention");
    const std::int64_t time = q.dim(1), keys = k.dim(1), head_dim = q.dim(3), group = q.dim(2) / k.dim(2);
    // [B, H, T, D] each, the key-value heads repeated for their query heads.
    const Tensor qh = q.transpose(1, 2);
    const Tensor kh = repeat_interleave(k.transpose(1, 2), group, 1);
    const Tensor vh = repeat_interleave(v.transpose(1, 2), group, 1);
    Tensor scores = matmul(qh, kh.mT()) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
    if (softcap > 0) scores = tanh(scores * (1.0 / softcap)) * softcap;
    const double blocked = -std::numeric_limits<double>::infinity();
    if (causal) {
        // Query i is at position keys - time + i: a key after it is out of
        // reach, and so is one before its lowest (its document's start, its window).
        const Tensor rows = (arange(time, DType::i32, q.device()) + static_cast<double>(keys - time)).unsqueeze(1);
        const Tensor cols = arange(keys, DType::i32, q.device()).unsqueeze(0);
        Tensor out_of_reach = cols > rows;
        if (causal_mask.window > 0)
            out_of_reach = out_of_reach | (cols <= rows - static_cast<double>(causal_mask.window));
        if (causal_mask.starts.defined()) {
            check_starts(causal_mask.starts, q, keys);
            // [B, 1, T, S]
            out_of_reach = out_of_reach | (cols < causal_mask.starts.unsqueeze(2)).unsqueeze(1);
        }
        scores = masked_fill(scores, out_of_reach, blocked);
    }
    if (mask) scores = masked_fill(scores, ~*mask, blocked);
    // [B, T, heads, D]
    return matmul(softmax(scores, -1), vh).transpose(1, 2);
}

}  // namespace levers::ops

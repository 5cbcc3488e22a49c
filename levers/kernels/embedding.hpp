// embedding: out[..., :] = wte[tokens[...]], plus a learned position
// wpe[t] where given (GPT-2's token + position embedding, t the position
// along the last axis of tokens). Conventions as in gelu.hpp. The kernels
// read contiguous memory: the op makes its inputs so.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

namespace levers {

// "embedding": out [..., C] from tokens (i32), wte [vocab, C], wpe [>= T, C] (optional).
struct EmbeddingCall : KernelCallBase {
    static constexpr const char* kName = "embedding";
    TensorArg out, tokens, wte, wpe;
};
// "embedding_backward": d_wte, d_wpe (each optional, added to).
struct EmbeddingBackwardCall : KernelCallBase {
    static constexpr const char* kName = "embedding_backward";
    TensorArg d_wte, d_wpe, d_out, tokens;
};

}  // namespace levers

namespace levers::kernels::cpu {

// out[B, T, C]; tokens[B, T] each in [0, vocab) (checked: a bad id throws
// levers::Error naming it); wte[vocab, C]; wpe[>= T, C] or null (no positions).
template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, index_t batch, index_t time,
                       index_t channels, index_t vocab);

// d_wte[tokens[b, t]] += d_out[b, t]; d_wpe[t] += d_out[b, t] (either may be null).
template <class T>
void embedding_backward(T* d_wte, T* d_wpe, const T* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels);

}  // namespace levers::kernels::cpu

namespace levers::kernels {
// Throws levers::Error naming the first token id outside [0, vocab) and where it is.
void check_token_ids(const std::int32_t* tokens, index_t n, index_t vocab);
}  // namespace levers::kernels

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// `ids` (i32, any shape) moved next to `table`; ids on the host going to a
// GPU are checked first (kernels on a GPU cannot throw; the CPU's check
// as they run).
inline Tensor ids_beside(const char* op, const char* arg_name, const Tensor& ids_in, const Tensor& table,
                         std::int64_t limit) {
    check_dtype(op, arg_name, ids_in, DType::i32);
    const Tensor ids = ids_in.contiguous();
    if (ids.device().is_cpu() && !table.device().is_cpu())
        kernels::check_token_ids(ids.data<std::int32_t>(), ids.numel(), limit);
    return ids.to(table.device());
}

// wte[tokens] (+ wpe[position] when wpe is given): tokens [..., T] i32 gives
// [..., T, C]; differentiable in the tables.
inline Tensor embedding(const Tensor& tokens, const Tensor& wte_in, const Tensor& wpe_in = Tensor()) {
    check_float("embedding", "weight", wte_in);
    const Tensor wte = dense(wte_in), wpe = dense(wpe_in);
    LEVERS_CHECK(wte.shape().ndim() == 2, "embedding: 'weight' is {}, expected [vocabulary, channels]", describe(wte));
    check_ndim_at_least("embedding", "tokens", tokens, 1);
    const std::int64_t channels = wte.dim(1), time = tokens.shape().last();
    if (wpe.defined()) {
        check_like("embedding", "positions", wpe, "weight", wte);
        LEVERS_CHECK(wpe.shape().ndim() == 2 && wpe.dim(1) == channels && wpe.dim(0) >= time,
                     "embedding: 'positions' is {}, but {} tokens per row of 'weight' {} need [>= {}, {}]",
                     describe(wpe), time, wte.shape().str(), time, channels);
    }
    const Tensor ids = ids_beside("embedding", "tokens", tokens, wte, wte.dim(0));
    Tensor out = Tensor::empty(tokens.shape().appended(channels), wte.dtype(), wte.device());
    EmbeddingCall call{.out = arg(out), .tokens = arg(ids), .wte = arg(wte), .wpe = arg(wpe)};
    run(wte, call);
    struct Saved {
        autograd::SavedTensor ids;
    };
    if (auto* s = autograd::record<Saved>(
            "embedding",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor d_wte = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                const Tensor d_wpe = g.needs_grad(2) ? g.add_grad(2) : Tensor();
                EmbeddingBackwardCall call{.d_wte = arg(d_wte), .d_wpe = arg(d_wpe), .d_out = arg(g.grad_out()),
                                           .tokens = arg(s.ids)};
                if (d_wte.defined() || d_wpe.defined()) run(g.grad_out(), call);
            },
            {&ids, &wte, &wpe}, {&out}))
        s->ids = ids;
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__

#include "levers/kernels/embedding.hpp"

#include "levers/core/error.hpp"

namespace levers::kernels {

void check_token_ids(const std::int32_t* tokens, index_t n, index_t vocab) {
    for (index_t i = 0; i < n; ++i)
        LEVERS_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token id {} at position {} is outside the vocabulary [0, {})",
                     tokens[i], i, vocab);
}

namespace cpu {

template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, index_t batch, index_t time,
                       index_t channels, index_t vocab) {
    check_token_ids(tokens, batch * time, vocab);
#pragma omp parallel for schedule(static)
    for (index_t i = 0; i < batch * time; ++i) {
        const T* te = wte + tokens[i] * channels;
        T* o = out + i * channels;
        if (wpe) {
            const T* pe = wpe + (i % time) * channels;
            for (index_t c = 0; c < channels; ++c) o[c] = te[c] + pe[c];
        } else {
            for (index_t c = 0; c < channels; ++c) o[c] = te[c];
        }
    }
}

template <class T>
void embedding_backward(T* d_wte, T* d_wpe, const T* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels) {
    // Serial on purpose: tokens repeat, so rows of d_wte would race; this is a
    // small fraction of a step.
    for (index_t i = 0; i < batch * time; ++i) {
        const T* g = d_out + i * channels;
        if (d_wte) {
            T* te = d_wte + tokens[i] * channels;
            for (index_t c = 0; c < channels; ++c) te[c] += g[c];
        }
        if (d_wpe) {
            T* pe = d_wpe + (i % time) * channels;
            for (index_t c = 0; c < channels; ++c) pe[c] += g[c];
        }
    }
}

template void embedding_forward<float>(float*, const std::int32_t*, const float*, const float*, index_t, index_t,
                                       index_t, index_t);
template void embedding_forward<double>(double*, const std::int32_t*, const double*, const double*, index_t,
                                        index_t, index_t, index_t);
template void embedding_backward<float>(float*, float*, const float*, const std::int32_t*, index_t, index_t, index_t);
template void embedding_backward<double>(double*, double*, const double*, const std::int32_t*, index_t, index_t,
                                         index_t);

namespace {
template <class T> void embedding(const EmbeddingCall& c) {
    const auto& tokens = c.tokens.shape;
    embedding_forward(c.out.as<T>(), c.tokens.as<std::int32_t>(), c.wte.as<T>(), c.wpe.as<T>(), tokens.rows(),
                      tokens.last(), c.wte.shape[1], c.wte.shape[0]);
}
template <class T> void embedding_grad(const EmbeddingBackwardCall& c) {
    const auto& tokens = c.tokens.shape;
    embedding_backward(c.d_wte.as<T>(), c.d_wpe.as<T>(), c.d_out.as<T>(), c.tokens.as<std::int32_t>(), tokens.rows(),
                       tokens.last(), c.d_out.shape.last());
}
LEVERS_KERNEL(EmbeddingCall, cpu, f32, embedding<float>);
LEVERS_KERNEL(EmbeddingCall, cpu, f64, embedding<double>);
LEVERS_KERNEL(EmbeddingBackwardCall, cpu, f32, embedding_grad<float>);
LEVERS_KERNEL(EmbeddingBackwardCall, cpu, f64, embedding_grad<double>);
}  // namespace

}  // namespace cpu
}  // namespace levers::kernels

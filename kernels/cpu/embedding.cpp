#include "kernels/embedding.hpp"

#include "framework/core/error.hpp"

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
template <class T> void embedding(const KernelCall& c) {
    const auto& tokens = c.t[1].shape;
    embedding_forward(c.t[0].as<T>(), c.t[1].as<std::int32_t>(), c.t[2].as<T>(), c.t[3].as<T>(), tokens.rows(),
                      tokens.last(), c.t[2].shape[1], c.t[2].shape[0]);
}
template <class T> void embedding_grad(const KernelCall& c) {
    const auto& tokens = c.t[3].shape;
    embedding_backward(c.t[0].as<T>(), c.t[1].as<T>(), c.t[2].as<T>(), c.t[3].as<std::int32_t>(), tokens.rows(),
                       tokens.last(), c.t[2].shape.last());
}
LEVERS_KERNEL(embedding, cpu, f32, embedding<float>);
LEVERS_KERNEL(embedding, cpu, f64, embedding<double>);
LEVERS_KERNEL(embedding_backward, cpu, f32, embedding_grad<float>);
LEVERS_KERNEL(embedding_backward, cpu, f64, embedding_grad<double>);
}  // namespace

}  // namespace cpu
}  // namespace levers::kernels

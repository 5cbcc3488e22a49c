#include "kernels/attention.hpp"

#include "framework/core/error.hpp"
#include "kernels/cpu/eigen_maps.hpp"

#include <vector>

namespace levers::kernels::cpu {

namespace {
void check_heads(index_t channels, index_t heads) {
    LEVERS_CHECK(heads > 0 && channels % heads == 0, "attention: {} channels do not split into {} heads", channels,
                 heads);
}
}  // namespace

template <class T>
void attention_forward(T* y, T* att, const T* qkv, index_t batch, index_t time, index_t channels, index_t heads) {
    check_heads(channels, heads);
    const index_t d = channels / heads;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    // One (batch, head) pair per task; Eigen runs single-threaded inside.
#pragma omp parallel for collapse(2) schedule(static)
    for (index_t b = 0; b < batch; ++b) {
        for (index_t h = 0; h < heads; ++h) {
            const T* base = qkv + b * time * 3 * channels + h * d;
            ConstStridedMap<T> q(base, time, d, Eigen::OuterStride<>(3 * channels));
            ConstStridedMap<T> k(base + channels, time, d, Eigen::OuterStride<>(3 * channels));
            ConstStridedMap<T> v(base + 2 * channels, time, d, Eigen::OuterStride<>(3 * channels));
            MatMap<T> p(att + (b * heads + h) * time * time, time, time);
            p.noalias() = scale * (q * k.transpose());
            // causal_softmax_row's maths, vectorised by Eigen's exp.
            for (index_t i = 0; i < time; ++i) {
                auto seen = p.row(i).head(i + 1).array();
                seen = (seen - seen.maxCoeff()).exp();
                seen /= seen.sum();
                p.row(i).tail(time - i - 1).setZero();
            }
            StridedMap<T> out(y + b * time * channels + h * d, time, d, Eigen::OuterStride<>(channels));
            out.noalias() = p.template triangularView<Eigen::Lower>() * v;
        }
    }
}

template <class T>
void attention_backward(T* d_qkv, const T* d_y, const T* att, const T* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads) {
    check_heads(channels, heads);
    const index_t d = channels / heads;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
#pragma omp parallel for collapse(2) schedule(static)
    for (index_t b = 0; b < batch; ++b) {
        for (index_t h = 0; h < heads; ++h) {
            thread_local std::vector<T> scratch;
            scratch.resize(static_cast<std::size_t>(time * time));
            const index_t offset = b * time * 3 * channels + h * d;
            const Eigen::OuterStride<> wide(3 * channels);
            ConstStridedMap<T> q(qkv + offset, time, d, wide);
            ConstStridedMap<T> k(qkv + offset + channels, time, d, wide);
            ConstStridedMap<T> v(qkv + offset + 2 * channels, time, d, wide);
            StridedMap<T> dq(d_qkv + offset, time, d, wide);
            StridedMap<T> dk(d_qkv + offset + channels, time, d, wide);
            StridedMap<T> dv(d_qkv + offset + 2 * channels, time, d, wide);
            ConstStridedMap<T> dy(d_y + b * time * channels + h * d, time, d, Eigen::OuterStride<>(channels));
            ConstMatMap<T> p(att + (b * heads + h) * time * time, time, time);
            MatMap<T> ds(scratch.data(), time, time);

            dv.noalias() = p.transpose().template triangularView<Eigen::Upper>() * dy;
            ds.noalias() = dy * v.transpose();  // d_p, turned into d_scores row by row
            for (index_t i = 0; i < time; ++i)
                softmax_row_backward(ds.data() + i * time, p.data() + i * time, ds.data() + i * time, i + 1);
            ds *= scale;
            dq.noalias() = ds.template triangularView<Eigen::Lower>() * k;
            dk.noalias() = ds.transpose().template triangularView<Eigen::Upper>() * q;
        }
    }
}

template void attention_forward<float>(float*, float*, const float*, index_t, index_t, index_t, index_t);
template void attention_forward<double>(double*, double*, const double*, index_t, index_t, index_t, index_t);
template void attention_backward<float>(float*, const float*, const float*, const float*, index_t, index_t, index_t,
                                        index_t);
template void attention_backward<double>(double*, const double*, const double*, const double*, index_t, index_t,
                                         index_t, index_t);

}  // namespace levers::kernels::cpu

#include "levers/kernels/attention.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/cpu/eigen_maps.hpp"
#include "levers/kernels/cpu/thread_scratch.hpp"

#include <type_traits>

namespace levers::kernels::cpu {

namespace {

#if defined(EIGEN_USE_BLAS)
constexpr bool kBlas = true;
#else
constexpr bool kBlas = false;
#endif
}  // namespace
}  // namespace levers::kernels::cpu

// BLAS's triangular products (OpenBLAS, where Eigen's products go to it).
extern "C" int strmm_(const char*, const char*, const char*, const char*, const int*, const int*, const float*,
                      const float*, const int*, float*, const int*);
extern "C" int dtrmm_(const char*, const char*, const char*, const char*, const int*, const int*, const double*,
                      const double*, const int*, double*, const int*);

namespace levers::kernels::cpu {
namespace {

// out[time, d] (rows out_ld apart) = op(m) · rhs[time, d] (rows rhs_ld apart),
// m row-major [time, time] of which only the lower (or upper) triangle is
// read, op transposing it or not. Through BLAS's trmm in place in `out`:
// Eigen's own route to it copies the right side into a heap temporary on
// every call, and a steady step allocates nothing.
template <class T>
void triangular_product(T* out, index_t out_ld, const T* m, bool lower, bool transposed, const T* rhs, index_t rhs_ld,
                        index_t time, index_t d) {
    StridedMap<T> o(out, time, d, Eigen::OuterStride<>(out_ld));
    ConstStridedMap<T> r(rhs, time, d, Eigen::OuterStride<>(rhs_ld));
    if constexpr (kBlas) {
        o = r;
        // Column-major, outᵀ := outᵀ · op(m)ᵀ, and row-major m is column-major mᵀ: its other triangle.
        const char side = 'R', uplo = lower ? 'U' : 'L', trans = transposed ? 'T' : 'N', diag = 'N';
        const int rows = static_cast<int>(d), cols = static_cast<int>(time), lda = static_cast<int>(time),
                  ldb = static_cast<int>(out_ld);
        const T one = 1;
        if constexpr (std::is_same_v<T, float>)
            strmm_(&side, &uplo, &trans, &diag, &rows, &cols, &one, m, &lda, out, &ldb);
        else
            dtrmm_(&side, &uplo, &trans, &diag, &rows, &cols, &one, m, &lda, out, &ldb);
    } else {
        ConstMatMap<T> mm(m, time, time);
        if (lower && !transposed) o.noalias() = mm.template triangularView<Eigen::Lower>() * r;
        if (lower && transposed) o.noalias() = mm.transpose().template triangularView<Eigen::Upper>() * r;
        if (!lower && !transposed) o.noalias() = mm.template triangularView<Eigen::Upper>() * r;
        if (!lower && transposed) o.noalias() = mm.transpose().template triangularView<Eigen::Lower>() * r;
    }
}

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
            MatMap<T> p(att + (b * heads + h) * time * time, time, time);
            p.noalias() = scale * (q * k.transpose());
            // causal_softmax_row's maths, vectorised by Eigen's exp.
            for (index_t i = 0; i < time; ++i) {
                auto seen = p.row(i).head(i + 1).array();
                seen = (seen - seen.maxCoeff()).exp();
                seen /= seen.sum();
                p.row(i).tail(time - i - 1).setZero();
            }
            triangular_product(y + b * time * channels + h * d, channels, p.data(), true, false, base + 2 * channels,
                               3 * channels, time, d);
        }
    }
}

template <class T>
void attention_backward(T* d_qkv, const T* d_y, const T* att, const T* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads) {
    check_heads(channels, heads);
    const index_t d = channels / heads;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    const ThreadScratch<T> scratch(static_cast<std::size_t>(time * time));
#pragma omp parallel for collapse(2) schedule(static)
    for (index_t b = 0; b < batch; ++b) {
        for (index_t h = 0; h < heads; ++h) {
            const index_t offset = b * time * 3 * channels + h * d;
            const Eigen::OuterStride<> wide(3 * channels);
            ConstStridedMap<T> v(qkv + offset + 2 * channels, time, d, wide);
            ConstStridedMap<T> dy(d_y + b * time * channels + h * d, time, d, Eigen::OuterStride<>(channels));
            ConstMatMap<T> p(att + (b * heads + h) * time * time, time, time);
            MatMap<T> ds(scratch.mine(), time, time);

            triangular_product(d_qkv + offset + 2 * channels, 3 * channels, p.data(), true, true,
                               d_y + b * time * channels + h * d, channels, time, d);  // dv = pᵀ · dy
            ds.noalias() = dy * v.transpose();  // d_p, turned into d_scores row by row
            for (index_t i = 0; i < time; ++i)
                softmax_row_backward(ds.data() + i * time, p.data() + i * time, ds.data() + i * time, i + 1);
            ds *= scale;
            triangular_product(d_qkv + offset, 3 * channels, ds.data(), true, false, qkv + offset + channels,
                               3 * channels, time, d);  // dq = ds · k
            triangular_product(d_qkv + offset + channels, 3 * channels, ds.data(), true, true, qkv + offset,
                               3 * channels, time, d);  // dk = dsᵀ · q
        }
    }
}

template void attention_forward<float>(float*, float*, const float*, index_t, index_t, index_t, index_t);
template void attention_forward<double>(double*, double*, const double*, index_t, index_t, index_t, index_t);
template void attention_backward<float>(float*, const float*, const float*, const float*, index_t, index_t, index_t,
                                        index_t);
template void attention_backward<double>(double*, const double*, const double*, const double*, index_t, index_t,
                                         index_t, index_t);

namespace {
template <class T> void attention(const AttentionCall& c) {
    const auto& qkv = c.qkv.shape;
    attention_forward(c.y.as<T>(), c.att.as<T>(), c.qkv.as<T>(), qkv[0], qkv[1], qkv[2] / 3, c.heads);
}
template <class T> void attention_grad(const AttentionBackwardCall& c) {
    const auto& qkv = c.qkv.shape;
    attention_backward(c.d_qkv.as<T>(), c.d_y.as<T>(), c.att.as<T>(), c.qkv.as<T>(), qkv[0], qkv[1], qkv[2] / 3,
                       c.heads);
}
LEVERS_KERNEL(AttentionCall, cpu, f32, attention<float>);
LEVERS_KERNEL(AttentionCall, cpu, f64, attention<double>);
LEVERS_KERNEL(AttentionBackwardCall, cpu, f32, attention_grad<float>);
LEVERS_KERNEL(AttentionBackwardCall, cpu, f64, attention_grad<double>);
}  // namespace

}  // namespace levers::kernels::cpu

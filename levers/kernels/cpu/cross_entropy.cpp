#include "levers/kernels/cross_entropy.hpp"

#include "levers/core/error.hpp"

#include <Eigen/Core>

namespace levers::kernels {

index_t counted_targets(const std::int32_t* targets, index_t rows, index_t vocab, std::int32_t ignore_index) {
    index_t counted = 0;
    for (index_t r = 0; r < rows; ++r) {
        if (targets[r] == ignore_index) continue;
        LEVERS_CHECK(targets[r] >= 0 && targets[r] < vocab,
                     "target {} in row {} is outside [0, {}) and is not the ignore index {}", targets[r], r, vocab,
                     ignore_index);
        ++counted;
    }
    return counted;
}

namespace cpu {

namespace {

template <class T> using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T> using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;

// logsumexp_row's maths, vectorised by Eigen's exp.
template <class T> T row_logsumexp(const T* x, index_t n) {
    ConstRow<T> row(x, n);
    const T m = row.maxCoeff();
    return m + std::log((row - m).exp().sum());
}

}  // namespace

template <class T>
T cross_entropy_forward(T* lse, const T* logits, const std::int32_t* targets, index_t rows, index_t vocab,
                        std::int32_t ignore_index) {
    index_t counted = counted_targets(targets, rows, vocab, ignore_index);
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (index_t r = 0; r < rows; ++r) {
        const T* x = logits + r * vocab;
        lse[r] = row_logsumexp(x, vocab);
        if (targets[r] != ignore_index) total += static_cast<double>(lse[r] - x[targets[r]]);
    }
    return counted == 0 ? T(0) : static_cast<T>(total / static_cast<double>(counted));
}

template <class T>
void cross_entropy_backward(T* d_logits, const T* lse, const T* logits, const std::int32_t* targets, T d_loss,
                            index_t rows, index_t vocab, std::int32_t ignore_index) {
    index_t counted = counted_targets(targets, rows, vocab, ignore_index);
    T scale = counted == 0 ? T(0) : d_loss / static_cast<T>(counted);
#pragma omp parallel for schedule(static)
    for (index_t r = 0; r < rows; ++r) {
        const T* x = logits + r * vocab;
        T* g = d_logits + r * vocab;
        if (targets[r] == ignore_index) {
            for (index_t j = 0; j < vocab; ++j) g[j] = 0;
            continue;
        }
        Row<T>(g, vocab) = (ConstRow<T>(x, vocab) - lse[r]).exp() * scale;
        g[targets[r]] -= scale;
    }
}

template float cross_entropy_forward<float>(float*, const float*, const std::int32_t*, index_t, index_t,
                                            std::int32_t);
template double cross_entropy_forward<double>(double*, const double*, const std::int32_t*, index_t, index_t,
                                              std::int32_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const std::int32_t*, float, index_t,
                                            index_t, std::int32_t);
template void cross_entropy_backward<double>(double*, const double*, const double*, const std::int32_t*, double,
                                             index_t, index_t, std::int32_t);

namespace {
void check_packed(index_t counted, index_t width) {
    LEVERS_CHECK(counted == 0 || counted == width, "cross_entropy on the CPU: {} of {} columns counted (the CPU kernels "
                 "take packed rows)", counted, width);
}
template <class T> void cross_entropy(const CrossEntropyCall& c) {
    const index_t vocab = c.logits.shape.last();
    check_packed(c.vocab, vocab);
    *c.loss.as<T>() = cross_entropy_forward(c.lse.as<T>(), c.logits.as<T>(), c.targets.as<std::int32_t>(),
                                            c.logits.shape.rows(), vocab, static_cast<std::int32_t>(c.ignore_index));
}
template <class T> void cross_entropy_grad(const CrossEntropyBackwardCall& c) {
    const index_t vocab = c.logits.shape.last();
    check_packed(c.vocab, vocab);
    cross_entropy_backward(c.d_logits.as<T>(), c.lse.as<T>(), c.logits.as<T>(), c.targets.as<std::int32_t>(),
                           static_cast<T>(c.d_loss), c.logits.shape.rows(), vocab,
                           static_cast<std::int32_t>(c.ignore_index));
}
LEVERS_KERNEL(CrossEntropyCall, cpu, f32, cross_entropy<float>);
LEVERS_KERNEL(CrossEntropyCall, cpu, f64, cross_entropy<double>);
LEVERS_KERNEL(CrossEntropyBackwardCall, cpu, f32, cross_entropy_grad<float>);
LEVERS_KERNEL(CrossEntropyBackwardCall, cpu, f64, cross_entropy_grad<double>);
}  // namespace

}  // namespace cpu

}  // namespace levers::kernels

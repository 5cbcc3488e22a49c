// softmax cross-entropy over rows of logits, mean over rows whose target is not
// ignore_index (e.g. padding). Saves only one log-sum-exp per row: no
// probabilities tensor beyond the logits. Conventions as in gelu.hpp. The
// kernels read contiguous rows: the op makes its input so. (levers/kernels/losses.hpp
// has the general form, with class weights and label smoothing.)
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <cmath>
#include <cstdint>

namespace levers {

// "cross_entropy": loss [1] and lse [rows], both in the accumulator dtype (f32
// for bf16), from logits [rows, width] and targets [rows] (i32).
struct CrossEntropyCall : KernelCallBase {
    static constexpr const char* kName = "cross_entropy";
    TensorArg loss, lse, logits, targets;
    std::int64_t ignore_index = -100;
    std::int64_t vocab = 0;  // the columns that count, <= width (0: all)
};
// "cross_entropy_backward": d_logits (written; may be the logits themselves).
struct CrossEntropyBackwardCall : KernelCallBase {
    static constexpr const char* kName = "cross_entropy_backward";
    TensorArg d_logits, lse, logits, targets;
    double d_loss = 1;
    std::int64_t ignore_index = -100;
    std::int64_t vocab = 0;
};

}  // namespace levers

namespace levers::kernels {

// log Σ exp(x[j]) for one row, stable.
template <class T> LEVERS_HD T logsumexp_row(const T* x, index_t n) {
    T m = x[0];
    for (index_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
    T s = 0;
    for (index_t j = 0; j < n; ++j) s += std::exp(x[j] - m);
    return m + std::log(s);
}

// How many rows count (target != ignore_index), on the host; throws
// levers::Error naming the first target outside [0, vocab) that is not the
// ignore index. The CPU op checks with it; callers of the GPU op, whose
// kernels cannot throw, check their targets with it before the copy.
index_t counted_targets(const std::int32_t* targets, index_t rows, index_t vocab, std::int32_t ignore_index = -100);

namespace cpu {

// Returns the mean loss over counted rows (0 if none) and writes lse[rows].
// targets[r] must be in [0, vocab) or equal ignore_index (checked: throws
// levers::Error naming the row).
template <class T>
T cross_entropy_forward(T* lse, const T* logits, const std::int32_t* targets, index_t rows, index_t vocab,
                        std::int32_t ignore_index = -100);

// d_logits = d_loss / counted · (softmax(logits) - onehot(target)); ignored
// rows get zeros. Written; may alias logits (computed in place).
template <class T>
void cross_entropy_backward(T* d_logits, const T* lse, const T* logits, const std::int32_t* targets, T d_loss,
                            index_t rows, index_t vocab, std::int32_t ignore_index = -100);

}  // namespace cpu
}  // namespace levers::kernels

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Targets for `rows` rows of `vocab` classes: i32 [rows] (any shape of that
// many elements), moved beside `logits`; targets on the host going to a GPU
// are checked first (the CPU kernels check them as they run).
inline Tensor targets_beside(const char* op, const Tensor& targets_in, const Tensor& logits, std::int64_t rows,
                             std::int64_t vocab, std::int64_t ignore_index) {
    check_dtype(op, "targets", targets_in, DType::i32);
    const Tensor targets = targets_in.contiguous();
    LEVERS_CHECK(targets.numel() == rows, "{}: 'targets' is {}, but {} rows of logits need {} targets", op,
                 describe(targets), rows, rows);
    if (targets.device().is_cpu() && !logits.device().is_cpu())
        kernels::counted_targets(targets.data<std::int32_t>(), rows, vocab, static_cast<std::int32_t>(ignore_index));
    return targets.to(logits.device());
}

// The cross-entropy kernels, for the ops made of them (rows `width` apart, `vocab` of them counted).
inline void cross_entropy_into(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                               std::int64_t ignore_index, std::int64_t vocab) {
    CrossEntropyCall call{.loss = arg(loss), .lse = arg(lse), .logits = arg(logits), .targets = arg(targets),
                          .ignore_index = ignore_index, .vocab = vocab};
    run(logits, call);
}
inline void cross_entropy_backward_into(const Tensor& d_logits, const Tensor& lse, const Tensor& logits,
                                        const Tensor& targets, double d_loss, std::int64_t ignore_index,
                                        std::int64_t vocab) {
    CrossEntropyBackwardCall call{.d_logits = arg(d_logits), .lse = arg(lse), .logits = arg(logits),
                                  .targets = arg(targets), .d_loss = d_loss, .ignore_index = ignore_index,
                                  .vocab = vocab};
    run(logits, call);
}

// The mean cross-entropy of logits [..., V] against targets (one per row,
// i32; rows whose target is ignore_index do not count): a one-element
// tensor in the accumulator dtype; differentiable in the logits.
inline Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, std::int64_t ignore_index = -100) {
    check_float("cross_entropy", "logits", logits_in);
    const Tensor logits = dense(logits_in);
    check_ndim_at_least("cross_entropy", "logits", logits, 1);
    const std::int64_t rows = logits.shape().rows(), vocab = logits.shape().last();
    const Tensor t = targets_beside("cross_entropy", targets, logits, rows, vocab, ignore_index);
    Tensor loss = Tensor::empty({1}, accumulator(logits.dtype()), logits.device());
    Tensor lse = Tensor::empty({rows}, accumulator(logits.dtype()), logits.device());
    cross_entropy_into(loss, lse, logits, t, ignore_index, 0);
    struct Saved {
        autograd::SavedTensor logits, lse, targets;
        std::int64_t ignore_index;
    };
    if (auto* s = autograd::record<Saved>(
            "cross_entropy",
            [](autograd::Backward& g, const Saved& s) {
                cross_entropy_backward_into(g.write_grad(0), s.lse, s.logits, s.targets, g.grad_out_scalar(),
                                            s.ignore_index, 0);
            },
            {&logits}, {&loss}))
        *s = {.logits = logits, .lse = lse, .targets = t, .ignore_index = ignore_index};
    return loss;
}

}  // namespace levers::ops
#endif  // !__CUDACC__

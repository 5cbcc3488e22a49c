// softmax cross-entropy over rows of logits, mean over rows whose target is not
// ignore_index (e.g. padding). Saves only one log-sum-exp per row: no
// probabilities tensor beyond the logits. Conventions as in residual.hpp.
//
// Kernel "cross_entropy": t0 loss [1] and t1 lse [rows], both in the
// accumulator dtype (f32 for bf16), t2 logits [rows, width], t3 targets
// [rows] (i32); i0 ignore_index, i1 vocab (the columns that count, <= width;
// 0: all). "cross_entropy_backward": t0 d_logits (written; may be the logits
// themselves), t1 lse, t2 logits, t3 targets; f0 d(loss); i0, i1 as forward.
#pragma once

#include "kernels/common.hpp"
#include "kernels/op.hpp"

#include <cmath>
#include <cstdint>

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
// ignore index. The CPU op checks with it; callers of the card op, whose
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

namespace levers::ops {

// Targets for `rows` rows of `vocab` classes: i32 [rows] (any shape of that
// many elements), moved beside `logits`; targets on the host going to a card
// are checked first (the CPU kernels check them as they run).
inline Tensor targets_beside(const char* op, const Tensor& targets, const Tensor& logits, std::int64_t rows,
                             std::int64_t vocab, std::int64_t ignore_index) {
    check_dtype(op, "targets", targets, DType::i32);
    LEVERS_CHECK(targets.numel() == rows, "{}: 'targets' is {}, but {} rows of logits need {} targets", op,
                 describe(targets), rows, rows);
    if (targets.device().is_cpu() && !logits.device().is_cpu())
        kernels::counted_targets(targets.data<std::int32_t>(), rows, vocab, static_cast<std::int32_t>(ignore_index));
    return targets.to(logits.device());
}

// The cross-entropy kernels, for the ops made of them (rows `width` apart, `vocab` of them counted).
inline void cross_entropy_into(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                               std::int64_t ignore_index, std::int64_t vocab) {
    static KernelSlot& kernel = kernel_slot("cross_entropy");
    KernelCall call = call_of(loss, lse, logits, targets);
    call.i[0] = ignore_index;
    call.i[1] = vocab;
    run(kernel, logits, call);
}
inline void cross_entropy_backward_into(const Tensor& d_logits, const Tensor& lse, const Tensor& logits,
                                        const Tensor& targets, double d_loss, std::int64_t ignore_index,
                                        std::int64_t vocab) {
    static KernelSlot& kernel = kernel_slot("cross_entropy_backward");
    KernelCall call = call_of(d_logits, lse, logits, targets);
    call.f[0] = d_loss;
    call.i[0] = ignore_index;
    call.i[1] = vocab;
    run(kernel, logits, call);
}

// The mean cross-entropy of logits [..., V] against targets (one per row,
// i32; rows whose target is ignore_index do not count): a one-element
// tensor in the accumulator dtype; differentiable in the logits.
inline Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100) {
    check_float("cross_entropy", "logits", logits);
    check_ndim_at_least("cross_entropy", "logits", logits, 1);
    const std::int64_t rows = logits.shape().rows(), vocab = logits.shape().last();
    const Tensor t = targets_beside("cross_entropy", targets, logits, rows, vocab, ignore_index);
    Tensor loss = Tensor::empty({1}, accumulator(logits.dtype()), logits.device());
    Tensor lse = Tensor::empty({rows}, accumulator(logits.dtype()), logits.device());
    cross_entropy_into(loss, lse, logits, t, ignore_index, 0);
    if (auto* node = autograd::record(
            "cross_entropy",
            [](autograd::Backward& g) {
                cross_entropy_backward_into(g.write_grad(0), g.saved(1), g.saved(0), g.saved(2), g.grad_out_scalar(),
                                            g.attr_int(0), 0);
            },
            {&logits}, {&loss})) {
        node->save(0, logits);
        node->save(1, lse);
        node->save(2, t);
        node->ints[0] = ignore_index;
    }
    return loss;
}

}  // namespace levers::ops

// softmax cross-entropy over rows of logits, mean over rows whose target is not
// ignore_index (e.g. padding). Saves only one log-sum-exp per row: no
// probabilities tensor beyond the logits. Conventions as in linear.hpp.
#pragma once

#include "kernels/common.hpp"

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

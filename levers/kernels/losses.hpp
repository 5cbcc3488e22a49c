// Losses, made of the general ops (so they run on every device and their
// gradients come from autograd), with PyTorch's definitions and reductions.
// Classes lie along the last dimension ([..., C], levers' convention for
// logits; PyTorch's is dimension 1: permute first when porting [N, C, d...]).
// ops::cross_entropy(logits, targets) alone is the fused kernel
// (levers/kernels/cross_entropy.hpp); with options it is log_softmax then nll.
#pragma once

#include "levers/kernels/cross_entropy.hpp"

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

enum class Reduction { mean, sum, none };

// (input - target)², |input - target|, and Huber's smooth L1 with threshold
// beta, per element, then reduced; input and target of one shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, double beta = 1.0,
                      Reduction reduction = Reduction::mean);

// Binary cross-entropy of sigmoid(logits) against targets in [0, 1], computed
// from the logits without overflow; `weight` (broadcast to the logits) scales
// each element, `pos_weight` (one per class, the last dimension) the positive term.
struct BceOptions {
    Tensor weight, pos_weight;
    Reduction reduction = Reduction::mean;
};
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, const BceOptions& options = {});

// The negative log-likelihood of log-probabilities [..., C] at targets (i32,
// one per row): weight [C] scales each class (the mean divides by the summed
// weights of the rows that count); rows whose target is ignore_index do not count.
struct NllOptions {
    Tensor weight;
    std::int64_t ignore_index = -100;
    Reduction reduction = Reduction::mean;
};
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllOptions& options = {});

// Cross-entropy of logits [..., C] with class weights and label smoothing ε:
// (1 - ε) · nll + ε / C · (the weighted sum of every class's -log p), as
// PyTorch computes it (its mean of the smoothing term counts ignored rows too).
struct CrossEntropyOptions {
    Tensor weight;
    double label_smoothing = 0;
    std::int64_t ignore_index = -100;
    Reduction reduction = Reduction::mean;
};
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options);

}  // namespace levers::ops
#endif  // !__CUDACC__

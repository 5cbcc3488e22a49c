// Activation checkpointing (PyTorch's torch.utils.checkpoint, non-reentrant
// in effect): a block's forward runs without recording, so its activations
// are freed as it goes; only its input is kept. Backward runs the block again,
// recording on a tape of its own (autograd::RecomputeScope), and
// back-propagates the block's output gradient through it. The gradients are
// bitwise those of the plain forward (the same kernels on the same values, in
// the same order), and dropout draws the same masks (the model's dropout
// counters are replayed). Memory: one block's activations at a time, plus
// every block's input; time: one more forward of each block.
//
//   for (GptBlock& block : h)
//       x = nn::checkpoint(block, x, [&block](const Tensor& in) { return block(in); });
#pragma once

#include "levers/nn/module.hpp"

#include <functional>
#include <utility>

namespace levers::nn {

// `fn(x)`, computing with `block`'s parameters (and no other trainable
// ones), with its activations recomputed during backward. Outside training
// (evaluation mode, InferenceMode) it is fn(x).
Tensor checkpoint(Module& block, const Tensor& x, std::function<Tensor(const Tensor&)> fn);

// The same for a block that gives a second, smaller output beside its own (a
// router's logits, which a loss of their own reads): both differentiable,
// recomputed together in backward.
std::pair<Tensor, Tensor> checkpoint_with_side(Module& block, const Tensor& x,
                                               std::function<std::pair<Tensor, Tensor>(const Tensor&)> fn);

}  // namespace levers::nn

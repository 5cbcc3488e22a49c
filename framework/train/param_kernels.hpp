// The loop's and the optimizer's sweeps over a whole ParamSet, run where its
// memory lives through the backends' kernels (kernels/grad_clip.hpp,
// kernels/adamw.hpp), over gradients in f32, f64 or bf16.
#pragma once

#include "framework/core/params.hpp"
#include "kernels/adamw.hpp"

#include <vector>

namespace levers::train {

// grads *= s.
void scale_grads(ParamSet& params, float s);
// Global-norm clipping of the gradients; returns the norm before clipping.
double clip_grad_norm(ParamSet& params, double max_norm);

// The AdamW kernel's chunks for every parameter of `params` (weight decay as
// each entry says), and the same as a tensor beside the parameters.
std::vector<kernels::AdamWChunk> adamw_chunks(const ParamSet& params);
Tensor adamw_chunk_table(const ParamSet& params);

}  // namespace levers::train

// The loop's and the optimizer's sweeps over a whole ParamSet, run where its
// memory lives: the CPU kernels, or the CUDA ones queued on the compute
// stream, over gradients in f32 or bf16. The only place the training loop
// learns which device it runs on.
#pragma once

#include "framework/core/params.hpp"
#include "kernels/adamw.hpp"

#include <vector>

namespace levers::train {

// grads *= s.
void scale_grads(ParamSet<float>& params, float s);
// Global-norm clipping of the gradients; returns the norm before clipping.
double clip_grad_norm(ParamSet<float>& params, double max_norm);

// AdamW over every parameter of `params`, moments m and v (flat, in T, on the
// parameters' device): on the CPU one call per parameter; on a card one
// launch over `chunks` (adamw_chunks(params), copied to the card: card_chunks).
template <class T> std::vector<kernels::AdamWChunk> adamw_chunks(const ParamSet<T>& params);
template <class T>
void adamw_update(ParamSet<T>& params, T* m, T* v, const kernels::AdamWHyper& h, long step,
                  const kernels::AdamWChunk* card_chunks, std::int64_t n_chunks);

}  // namespace levers::train

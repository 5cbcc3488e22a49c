// The loop's and the optimizer's sweeps over a whole ParamSet, run where its
// memory lives: the CPU kernels, or the CUDA ones queued on the compute
// stream. The only place the training loop learns which device it runs on.
#pragma once

#include "framework/core/params.hpp"
#include "kernels/adamw.hpp"

namespace levers::train {

// grads *= s.
void scale_grads(ParamSet<float>& params, float s);
// Global-norm clipping of the gradients; returns the norm before clipping.
double clip_grad_norm(ParamSet<float>& params, double max_norm);
// AdamW on one parameter's elements (the pointers on `device`).
template <class T>
void adamw_update(Device device, T* param, T* m, T* v, const T* grad, std::int64_t n, const kernels::AdamWHyper& h,
                  long step);

}  // namespace levers::train

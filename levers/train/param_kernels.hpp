// The loop's and the optimizer's sweeps over a whole ParamSet, run where its
// memory lives through the backends' kernels (levers/kernels/grad_clip.hpp,
// levers/kernels/adamw.hpp), over gradients in f32, f64 or bf16.
#pragma once

#include "levers/core/flat_shard.hpp"
#include "levers/core/params.hpp"
#include "levers/kernels/adamw.hpp"

#include <vector>

namespace levers::train {

// grads *= s.
void scale_grads(ParamSet& params, float s);
// Global-norm clipping of the gradients; returns the norm before clipping.
double clip_grad_norm(ParamSet& params, double max_norm);
// The same over `shard` of them (ZeRO: each rank holds its shard's averaged
// gradients): the norm over every rank's shard, each scaled as the whole
// would be. Collective unless the shard is the whole.
double clip_grad_norm(ParamSet& params, const FlatShard& shard, double max_norm);

// The AdamW kernel's chunks for the elements [begin, end) of `params`' flat
// buffer (weight decay as each entry says), starts counted from `begin`; and
// the same as a tensor beside the parameters.
std::vector<kernels::AdamWChunk> adamw_chunks(const ParamSet& params, std::int64_t begin, std::int64_t end);
Tensor adamw_chunk_table(const ParamSet& params, std::int64_t begin, std::int64_t end);

}  // namespace levers::train

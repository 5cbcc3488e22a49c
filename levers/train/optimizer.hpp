// AdamW over a ParamSet: moment buffers as flat as the parameters and where
// they live (the CPU or the GPU), weight decay only where the parameter asks
// for it (matrices and embeddings, not biases or layernorm gains). The update
// is the backends' "adamw" kernel (levers/kernels/adamw.hpp): one pass over the flat
// buffers, in f32 (or f64) master values whatever the gradients' dtype.
//
// Under ZeRO the optimizer owns a shard of the flat buffer (FlatShard: the
// ranges a rank updates); its moments hold those elements only, compactly,
// and a step runs the kernel once per range.
#pragma once

#include "levers/core/flat_shard.hpp"
#include "levers/core/params.hpp"
#include "levers/kernels/adamw.hpp"

#include <vector>

namespace levers::train {

class AdamW {
public:
    // Over all of `params`, or over `shard` of them.
    AdamW(ParamSet& params, const kernels::AdamWHyper& hyper);
    AdamW(ParamSet& params, const kernels::AdamWHyper& hyper, FlatShard shard);

    // One update with learning rate `lr` from the gradients in params.grads()
    // (of the shard's elements). Throws levers::Error if the parameters were
    // laid out again since (adapters attached, layers frozen, the model moved).
    void step(double lr);
    long steps_taken() const { return step_; }

    const FlatShard& shard() const { return shard_; }
    // The moments of the shard's elements, in shard order.
    const Tensor& first_moment() const { return m_; }
    const Tensor& second_moment() const { return v_; }
    // Continues from saved moments of the whole flat buffer after `steps`
    // updates (resuming a run, on any number of ranks: each takes its shard);
    // throws levers::Error if their sizes do not match the parameters.
    void load(const Tensor& m, const Tensor& v, long steps);

private:
    ParamSet& params_;
    kernels::AdamWHyper hyper_;
    FlatShard shard_;
    Tensor m_, v_;
    std::vector<Tensor> chunks_;  // the kernel's chunk table per range, where the parameters are
    Tensor params_seen_;  // the flat buffer the moments belong to
    long step_ = 0;
};

}  // namespace levers::train

// One optimizer step's gradients: the micro-batches' gradients accumulate in
// params.grads(), the last micro-batch's backward averages them over ranks in
// buckets (dist::ParamSync) as it finishes them (under ZeRO-2 every
// micro-batch's, into the rank's shard), and the sum is divided by the number
// of micro-batches. A recipe that owns its loop can use it as the
// training loop does.
#pragma once

#include "levers/core/params.hpp"
#include "levers/distributed/data_parallel.hpp"
#include "levers/train/early_stopping.hpp"

#include <functional>

namespace levers::train {

struct MicroResult {
    double loss = 0;  // mean loss of this micro-batch
    long items = 0;   // tokens or samples it processed
    Metrics metrics;  // more to log per step (a preference run's rewards): the same names every micro-batch and rank
};

struct StepGradients {
    double loss = 0;       // mean over the micro-batches and the ranks
    std::int64_t items = 0;  // processed by all ranks
    Metrics metrics;         // each the mean over the micro-batches and the ranks
};

// Collective: zeroes the gradients, runs `micro_step(step, micro)` for micro =
// 0..grad_accum-1 (each adds its gradients), and leaves params.grads() the
// mean over micro-batches and ranks. Throws levers::Error if the loss diverged.
StepGradients accumulate_gradients(ParamSet& params, dist::ParamSync& ddp, long grad_accum, long step,
                                   const std::function<MicroResult(long step, long micro)>& micro_step);

}  // namespace levers::train

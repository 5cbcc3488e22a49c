#include "levers/train/grad_accumulation.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"
#include "levers/train/param_kernels.hpp"

#include <cmath>

namespace levers::train {

StepGradients accumulate_gradients(ParamSet& params, dist::ParamSync& ddp, long grad_accum, long step,
                                   const std::function<MicroResult(long step, long micro)>& micro_step) {
    params.zero_grad();
    StepGradients out;
    for (long micro = 0; micro < grad_accum; ++micro) {
        // Only the last micro-batch's backward starts the averaging; earlier ones just accumulate (under ZeRO-2
        // each is averaged into the rank's shard: there is no whole buffer to accumulate in).
        const bool sync = micro + 1 == grad_accum || ddp.averages_every_micro_batch();
        if (sync) ddp.arm();
        const MicroResult r = micro_step(step, micro);
        if (sync) ddp.finish();  // every bucket averaged over ranks
        out.loss += r.loss / static_cast<double>(grad_accum);
        out.items += r.items * dist::world_size();
        for (const auto& [name, value] : r.metrics) out.metrics[name] += value / static_cast<double>(grad_accum);
    }
    if (dist::backend()) {
        out.loss = dist::all_reduce_mean(out.loss);
        if (!out.metrics.empty()) {  // one collective for them all, in the map's order (the same on every rank)
            std::vector<double> values;
            for (const auto& [name, value] : out.metrics) values.push_back(value);
            dist::all_reduce_sum(values);
            std::size_t k = 0;
            for (auto& [name, value] : out.metrics) value = values[k++] / dist::world_size();
        }
    }
    LEVERS_CHECK(std::isfinite(out.loss), "training diverged: loss is {} at step {} (try a lower lr)", out.loss, step);
    if (grad_accum > 1) scale_grads(params, 1.0f / static_cast<float>(grad_accum));
    return out;
}

}  // namespace levers::train

#include "levers/train/loop.hpp"

#include "levers/core/clock.hpp"
#include "levers/core/tensor_memory.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/data_parallel.hpp"
#include "levers/distributed/zero.hpp"
#include "levers/train/loop_report.hpp"
#include "levers/train/param_kernels.hpp"
#include "levers/train/time_split.hpp"

#include <cmath>
#include <memory>

namespace levers::train {

void LoopOptions::validate() const {
    LEVERS_CHECK(steps >= 1, "steps must be >= 1, got {}", steps);
    LEVERS_CHECK(grad_accum >= 1, "grad_accum must be >= 1, got {}", grad_accum);
    LEVERS_CHECK(lr.peak > 0 && std::isfinite(lr.peak), "lr must be a positive number, got {}", lr.peak);
    LEVERS_CHECK(lr.warmup >= 0, "warmup must be >= 0, got {}", lr.warmup);
    LEVERS_CHECK(log_every >= 1, "log_every must be >= 1, got {}", log_every);
    LEVERS_CHECK(eval_every >= 0, "eval_every must be >= 0, got {}", eval_every);
    LEVERS_CHECK(adamw.weight_decay >= 0, "weight_decay must be >= 0, got {}", adamw.weight_decay);
    LEVERS_CHECK(early_stop.metric.empty() || (early_stop.patience >= 1 && early_stop.min_delta >= 0),
                 "early stopping needs patience >= 1 and min_delta >= 0, got {} and {}", early_stop.patience,
                 early_stop.min_delta);
    dist::check_zero_stage(zero);
    LEVERS_CHECK(start.step >= 0 && start.step <= steps, "cannot resume at step {} of a run of {} steps", start.step,
                 steps);
}

namespace {

// The loop's end in the result: what it held and where its time went.
void fill_result(LoopResult& result, const AdamW& optimizer, const dist::ParamSync& ddp, const ParamSet& params,
                 const TimeSplit& split, double train_seconds) {
    const LoopState& st = result.end;
    result.steps = st.step;
    result.optimizer_state_elements = optimizer.first_moment().numel() + optimizer.second_moment().numel();
    result.averaged_gradient_elements = ddp.zero() == 2 ? ddp.shard().size() : params.size();
    result.best_step = st.best_step;
    result.best_metric = st.best_metric;
    const Split spent = split.at(train_seconds);
    result.compute_seconds = spent.compute;
    result.communication_seconds = spent.communication;
    result.waiting_seconds = spent.waiting;
    result.hidden_communication_seconds = spent.hidden_communication;
}

}  // namespace

LoopResult train_loop(ParamSet& params, const LoopOptions& options,
                      const std::function<MicroResult(long step, long micro)>& micro_step,
                      const std::function<Metrics(long step)>& evaluate) {
    options.validate();
    dist::ParamSync ddp(params, options.bucket_bytes, options.zero);  // every rank starts from rank 0's parameters
    auto adamw = std::make_unique<AdamW>(params, options.adamw, ddp.shard());  // under ZeRO, this rank's shard
    AdamW& optimizer = *adamw;
    if (options.restore_optimizer) options.restore_optimizer(optimizer);
    TimeSplit split(dist::backend(), ddp.buckets());
    LoopReport report(options, dist::is_main());
    LoopResult result;
    LoopState& st = result.end;
    st = options.start;
    result.loss = st.last_loss;  // what a run resumed at its last step, with nothing left to train, reports

    // ZeRO's gathered parameters arrive while the next forward runs (on the group's communication thread under
    // shared memory): the loop's own collectives (evaluation's means, checkpoints) wait for them first.
    auto settle = [&] { params.await(params.size()); };
    auto evaluation = [&](long step) {
        settle();
        const auto began = Clock::now();
        split.begin_excluded();
        Metrics m = evaluate(step);
        split.end_excluded();
        report.evaluated(step, m, seconds_since(began));
        return m;
    };

    if (evaluate && options.eval_at_start && st.step == 0) result.first_eval = evaluation(0);
    for (long step = st.step; step < options.steps; ++step) {
        const auto began = Clock::now();
        const StepGradients grads = accumulate_gradients(params, ddp, options.grad_accum, step, micro_step);
        const double norm = clip_grad_norm(params, ddp.shard(), options.grad_clip);
        const double lr = options.lr.at(step);
        optimizer.step(lr);
        ddp.gather_params();  // under ZeRO: every rank's updated shard to all
        if (step == options.start.step) result.peak_tensor_bytes = tensor_memory(params.device().kind).peak();
        report.stepped(st, grads, lr, norm, began, result);

        Metrics eval;
        const bool last = st.step == options.steps;
        if (evaluate && ((options.eval_every > 0 && st.step % options.eval_every == 0) || last)) {
            eval = result.last_eval = evaluation(st.step);
            if (!options.early_stop.metric.empty() && should_stop(options.early_stop, st, eval, last)) {
                report.stopping_early(st);
                result.stopped_early = true;
            }
        }
        st.train_seconds = report.train_seconds();
        if (options.after_step) {
            settle();
            options.after_step(st, optimizer, eval.empty() ? nullptr : &eval);
        }
        if (result.stopped_early) {
            report.close_window(st, result);
            break;
        }
    }
    fill_result(result, optimizer, ddp, params, split, report.finish(result));
    // AdamW's state goes before ZeRO gathers the whole master values back (they are more than it at 3+ ranks).
    adamw.reset();
    ddp.end();
    return result;
}

}  // namespace levers::train

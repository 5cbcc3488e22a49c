#include "levers/train/loop.hpp"

#include "levers/core/clock.hpp"
#include "levers/core/tensor_memory.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/data_parallel.hpp"
#include "levers/distributed/zero.hpp"
#include "levers/train/metrics_log.hpp"
#include "levers/train/param_kernels.hpp"
#include "levers/train/progress_console.hpp"
#include "levers/train/time_split.hpp"

#include <fmt/format.h>

#include <chrono>
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

LoopResult train_loop(ParamSet& params, const LoopOptions& options,
                      const std::function<MicroResult(long step, long micro)>& micro_step,
                      const std::function<Metrics(long step)>& evaluate) {
    options.validate();
    dist::ParamSync ddp(params, options.bucket_bytes, options.zero);  // every rank starts from rank 0's parameters
    auto adamw = std::make_unique<AdamW>(params, options.adamw, ddp.shard());  // under ZeRO, this rank's shard
    AdamW& optimizer = *adamw;
    if (options.restore_optimizer) options.restore_optimizer(optimizer);
    TimeSplit split(dist::backend(), ddp.buckets());
    MetricsLog* metrics = dist::is_main() ? options.metrics : nullptr;
    ProgressConsole console(options.live_progress);

    LoopResult result;
    LoopState& st = result.end;
    st = options.start;
    const auto start = Clock::now();
    auto window_start = start;
    double eval_seconds = 0;
    std::int64_t window_items = 0, items_here = 0;
    double lr = 0, norm = 0;
    // The progress line of the window ending at this step; its mean is the result's loss.
    auto log_window = [&] {
        const double mean = st.window_loss / static_cast<double>(st.window_steps);
        console.line(fmt::format("step {:>5}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} {}/s", st.step,
                                 options.steps, mean, lr, norm,
                                 static_cast<double>(window_items) / seconds_since(window_start), options.unit));
        result.loss = mean;
        result.loss_curve.emplace_back(st.step, mean);
        window_start = Clock::now();
        st.window_loss = 0;
        st.window_steps = 0;
        window_items = 0;
    };
    // Training time, evaluation excluded, earlier processes of a resumed run included.
    auto wall = [&, before_now = st.train_seconds] { return before_now + seconds_since(start) - eval_seconds; };

    // ZeRO's gathered parameters arrive while the next forward runs (on the group's communication thread under
    // shared memory): the loop's own collectives (evaluation's means, checkpoints) wait for them first.
    auto settle = [&] { params.await(params.size()); };
    auto run_evaluation = [&](long step) {
        settle();
        const auto eval_start = Clock::now();
        split.begin_excluded();
        Metrics m = evaluate(step);
        split.end_excluded();
        eval_seconds += seconds_since(eval_start);
        console.line(eval_line(step, m));
        if (metrics) metrics->eval(step, m, wall());
        window_start = Clock::now();  // keep evaluation out of the throughput figures
        return m;
    };

    if (evaluate && options.eval_at_start && st.step == 0) result.first_eval = run_evaluation(0);
    for (long step = st.step; step < options.steps; ++step) {
        const auto step_start = Clock::now();
        const StepGradients grads = accumulate_gradients(params, ddp, options.grad_accum, step, micro_step);
        norm = clip_grad_norm(params, ddp.shard(), options.grad_clip);
        lr = options.lr.at(step);
        optimizer.step(lr);
        ddp.gather_params();  // under ZeRO: every rank's updated shard to all
        if (step == options.start.step) result.peak_tensor_bytes = tensor_memory(params.device().kind).peak();
        st.step = step + 1;
        st.items += grads.items;
        st.window_loss += grads.loss;
        ++st.window_steps;
        window_items += grads.items;
        items_here += grads.items;
        if (metrics)
            metrics->train(st.step, grads.loss, lr, norm, st.items,
                           static_cast<double>(grads.items) / seconds_since(step_start), wall());

        const bool last = st.step == options.steps;
        if (st.step % options.log_every == 0 || last) {
            log_window();
        } else if (console.due()) {  // formatting only when something is drawn: this is every step
            const double trained = seconds_since(start) - eval_seconds;
            const double left =
                static_cast<double>(options.steps - st.step) * trained / static_cast<double>(st.step - options.start.step);
            console.redraw(fmt::format("step {:>5}/{} | loss {:.4f} | {:.0f} {}/s | {} left", st.step, options.steps,
                                       grads.loss, static_cast<double>(items_here) / trained, options.unit,
                                       duration_text(left)));
        }

        Metrics eval;
        const bool eval_now = options.eval_every > 0 && st.step % options.eval_every == 0;
        if (evaluate && (eval_now || last)) {
            eval = run_evaluation(st.step);
            result.last_eval = eval;
            if (!options.early_stop.metric.empty() && should_stop(options.early_stop, st, eval, last)) {
                console.line(stop_line(options.early_stop, st));
                result.stopped_early = true;
            }
        }
        st.train_seconds = wall();
        if (options.after_step) {
            settle();
            options.after_step(st, optimizer, eval.empty() ? nullptr : &eval);
        }
        if (result.stopped_early) {
            if (st.window_steps > 0) log_window();
            break;
        }
    }
    result.steps = st.step;
    result.optimizer_state_elements = optimizer.first_moment().numel() + optimizer.second_moment().numel();
    result.averaged_gradient_elements = ddp.zero() == 2 ? ddp.shard().size() : params.size();
    result.best_step = st.best_step;
    result.best_metric = st.best_metric;
    result.seconds = seconds_since(start);
    const double train_seconds = result.seconds - eval_seconds;
    result.items_per_second = static_cast<double>(items_here) / train_seconds;
    const Split spent = split.at(train_seconds);
    result.compute_seconds = spent.compute;
    result.communication_seconds = spent.communication;
    result.waiting_seconds = spent.waiting;
    result.hidden_communication_seconds = spent.hidden_communication;
    // AdamW's state goes before ZeRO gathers the whole master values back (they are more than it at 3+ ranks).
    adamw.reset();
    ddp.end();
    return result;
}

}  // namespace levers::train

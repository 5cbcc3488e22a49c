#include "framework/train/loop.hpp"

#include "framework/dist/context.hpp"
#include "framework/dist/data_parallel.hpp"
#include "framework/train/optimizer.hpp"
#include "kernels/grad_clip.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace levers::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void print_eval(long step, const Metrics& m) {
    std::string line = fmt::format("eval step {:>5}", step);
    for (const auto& [name, value] : m) line += fmt::format(" | {} {:.4f}", name, value);
    dist::print0("{}\n", line);
}
}  // namespace

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
}

LoopResult train_loop(ParamSet<float>& params, const LoopOptions& options,
                      const std::function<MicroResult(long step, long micro)>& micro_step,
                      const std::function<Metrics(long step)>& evaluate) {
    options.validate();
    AdamW<float> optimizer(params, options.adamw);
    float* grads = params.grads().data<float>();
    const auto n = params.size();
    dist::ShmBackend* group = dist::backend();
    const dist::ShmBackend::Timing before = group ? group->timing() : dist::ShmBackend::Timing{};
    dist::ParamSync ddp(params, options.bucket_bytes);  // every rank starts from rank 0's parameters
    const dist::GradientSync* sync = ddp.buckets();
    double eval_collectives = 0, eval_waiting = 0;  // evaluation's share, kept out of the split

    LoopResult result;
    const auto start = Clock::now();
    auto window_start = start;
    double window_loss = 0, eval_seconds = 0;
    long window_steps = 0, window_items = 0, total_items = 0;
    long evals_without_gain = 0;
    bool have_best = false;

    if (evaluate && options.eval_at_start) {
        const auto eval_start = Clock::now();
        result.first_eval = evaluate(0);
        print_eval(0, result.first_eval);
        eval_seconds += seconds_since(eval_start);
        window_start = Clock::now();
    }
    for (long step = 0; step < options.steps; ++step) {
        params.zero_grad();
        double loss = 0;
        for (long micro = 0; micro < options.grad_accum; ++micro) {
            // Only the last micro-batch's backward starts the averaging; earlier ones just accumulate.
            const bool last_micro = micro + 1 == options.grad_accum;
            if (last_micro) ddp.arm();
            MicroResult r = micro_step(step, micro);
            if (last_micro) ddp.finish();  // every bucket averaged over ranks
            loss += r.loss / static_cast<double>(options.grad_accum);
            window_items += r.items * dist::world_size();  // the job's throughput, all ranks
            total_items += r.items * dist::world_size();
        }
        if (group) loss = dist::all_reduce_mean(loss);
        LEVERS_CHECK(std::isfinite(loss), "training diverged: loss is {} at step {} (try a lower lr)", loss, step);
        if (options.grad_accum > 1) {
            const float scale = 1.0f / static_cast<float>(options.grad_accum);
            for (std::int64_t i = 0; i < n; ++i) grads[i] *= scale;
        }
        const double norm = kernels::cpu::clip_grad_norm(grads, n, options.grad_clip);
        const double lr = options.lr.at(step);
        optimizer.step(lr);
        window_loss += loss;
        ++window_steps;

        const bool last = step + 1 == options.steps;
        if ((step + 1) % options.log_every == 0 || last) {
            const double secs = seconds_since(window_start);
            const double mean = window_loss / static_cast<double>(window_steps);
            dist::print0("step {:>5}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} {}/s\n", step + 1,
                         options.steps, mean, lr, norm, static_cast<double>(window_items) / secs, options.unit);
            result.loss = mean;
            result.loss_curve.emplace_back(step + 1, mean);
            window_start = Clock::now();
            window_loss = 0;
            window_steps = window_items = 0;
        }
        const bool eval_now = options.eval_every > 0 && (step + 1) % options.eval_every == 0;
        if (evaluate && (eval_now || last)) {
            const auto eval_start = Clock::now();
            const dist::ShmBackend::Timing eval_before = group ? group->timing() : dist::ShmBackend::Timing{};
            result.last_eval = evaluate(step + 1);
            if (group) {
                eval_collectives += group->timing().in_collectives - eval_before.in_collectives;
                eval_waiting += group->timing().waiting - eval_before.waiting;
            }
            print_eval(step + 1, result.last_eval);
            eval_seconds += seconds_since(eval_start);
            window_start = Clock::now();  // keep evaluation out of the throughput figures
            if (!options.early_stop.metric.empty()) {
                const auto& es = options.early_stop;
                auto it = result.last_eval.find(es.metric);
                if (it == result.last_eval.end()) {
                    std::string have;
                    for (const auto& [name, v] : result.last_eval) have += (have.empty() ? "" : ", ") + name;
                    LEVERS_FAIL("early stopping watches '{}', but evaluation reports only: {}", es.metric, have);
                }
                const double gain = es.maximize ? it->second - result.best_metric : result.best_metric - it->second;
                if (!have_best || gain > es.min_delta) {
                    have_best = true;
                    result.best_metric = it->second;
                    result.best_step = step + 1;
                    evals_without_gain = 0;
                } else if (++evals_without_gain >= es.patience && !last) {
                    dist::print0("early stop at step {}: {} has not improved on {:.4f} (step {}) for {} evaluations\n",
                                 step + 1, es.metric, result.best_metric, result.best_step, evals_without_gain);
                    result.stopped_early = true;
                }
            }
        }
        if (options.after_step) options.after_step(step + 1);
        if (result.stopped_early) {
            result.steps = step + 1;
            break;
        }
    }
    if (!result.stopped_early) result.steps = options.steps;
    result.seconds = seconds_since(start);
    const double train_seconds = result.seconds - eval_seconds;
    result.items_per_second = static_cast<double>(total_items) / train_seconds;
    if (group) {
        // Collectives of this (main) thread: all of them less the communication thread's.
        const double main_collectives = group->timing().in_collectives - before.in_collectives - eval_collectives -
                                        sync->busy_seconds();
        const double main_waiting =
            group->timing().waiting - before.waiting - eval_waiting - sync->busy_waiting_seconds();
        result.waiting_seconds = main_waiting;
        result.communication_seconds = sync->exposed_seconds() + main_collectives - main_waiting;
        result.compute_seconds = train_seconds - sync->exposed_seconds() - main_collectives;
        result.hidden_communication_seconds = std::max(0.0, sync->busy_seconds() - sync->exposed_seconds());
    } else {
        result.compute_seconds = train_seconds;
    }
    return result;
}

}  // namespace levers::train

#include "framework/train/loop.hpp"

#include "framework/dist/context.hpp"
#include "framework/dist/data_parallel.hpp"
#include "framework/train/metrics_log.hpp"
#include "framework/train/param_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace levers::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string eval_line(long step, const Metrics& m) {
    std::string line = fmt::format("eval step {:>5}", step);
    for (const auto& [name, value] : m) line += fmt::format(" | {} {:.4f}", name, value);
    return line;
}

std::string duration(double s) {
    const long t = std::lround(s);
    return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

// Rank 0's console: permanent lines, and one line redrawn in place between
// them (step, loss, throughput, time left): directly on a terminal, or as
// marked lines the launcher draws (live_progress.hpp).
class Console {
public:
    explicit Console(LiveProgress mode) : mode_(dist::is_main() ? mode : LiveProgress::off) {}

    void line(const std::string& text) {
        if (!dist::is_main()) return;
        fmt::print("{}{}\n", mode_ == LiveProgress::terminal ? "\r\x1b[K" : "", text);
        std::fflush(stdout);
    }
    // Whether a redraw is due (at most four a second, and never without a live line).
    bool due() const { return mode_ != LiveProgress::off && seconds_since(last_) >= 0.25; }
    void redraw(const std::string& text) {
        last_ = Clock::now();
        if (mode_ == LiveProgress::terminal)
            fmt::print("\r\x1b[K{}", text);
        else
            fmt::print("{}{}\n", kProgressMark, text);
        std::fflush(stdout);
    }

private:
    LiveProgress mode_;
    Clock::time_point last_ = Clock::now();
};
}  // namespace

nlohmann::json to_json(const LoopState& s) {
    return {{"step", s.step},
            {"items", s.items},
            {"window_loss", s.window_loss},
            {"window_steps", s.window_steps},
            {"have_best", s.have_best},
            {"best_metric", s.best_metric},
            {"best_step", s.best_step},
            {"evals_without_gain", s.evals_without_gain},
            {"train_seconds", s.train_seconds}};
}

LoopState loop_state_from_json(const nlohmann::json& j, const std::string& file) {
    try {
        LoopState s;
        s.step = j.at("step").get<long>();
        s.items = j.at("items").get<std::int64_t>();
        s.window_loss = j.at("window_loss").get<double>();
        s.window_steps = j.at("window_steps").get<long>();
        s.have_best = j.at("have_best").get<bool>();
        s.best_metric = j.at("best_metric").get<double>();
        s.best_step = j.at("best_step").get<long>();
        s.evals_without_gain = j.at("evals_without_gain").get<long>();
        s.train_seconds = j.at("train_seconds").get<double>();
        return s;
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: the training loop's state in the metadata is incomplete: {}", file, e.what());
    }
}

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
    LEVERS_CHECK(start.step >= 0 && start.step <= steps, "cannot resume at step {} of a run of {} steps", start.step,
                 steps);
}

LoopResult train_loop(ParamSet& params, const LoopOptions& options,
                      const std::function<MicroResult(long step, long micro)>& micro_step,
                      const std::function<Metrics(long step)>& evaluate) {
    options.validate();
    AdamW optimizer(params, options.adamw);
    if (options.restore_optimizer) options.restore_optimizer(optimizer);
    dist::Backend* group = dist::backend();
    dist::ParamSync ddp(params, options.bucket_bytes);  // every rank starts from rank 0's parameters
    const dist::GradientSync* sync = ddp.buckets();
    const dist::Backend::Timing before = group ? group->timing() : dist::Backend::Timing{};
    double eval_collectives = 0, eval_waiting = 0;  // evaluation's share, kept out of the split
    MetricsLog* metrics = dist::is_main() ? options.metrics : nullptr;
    Console console(options.live_progress);

    LoopResult result;
    LoopState& st = result.end;
    st = options.start;
    const auto start = Clock::now();
    auto window_start = start;
    double eval_seconds = 0;
    long window_items = 0, items_here = 0;
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

    auto run_evaluation = [&](long step) {
        const auto eval_start = Clock::now();
        const dist::Backend::Timing eval_before = group ? group->timing() : dist::Backend::Timing{};
        Metrics m = evaluate(step);
        if (group) {
            eval_collectives += group->timing().in_collectives - eval_before.in_collectives;
            eval_waiting += group->timing().waiting - eval_before.waiting;
        }
        eval_seconds += seconds_since(eval_start);
        console.line(eval_line(step, m));
        if (metrics) metrics->eval(step, m, wall());
        window_start = Clock::now();  // keep evaluation out of the throughput figures
        return m;
    };

    if (evaluate && options.eval_at_start && st.step == 0) result.first_eval = run_evaluation(0);
    for (long step = st.step; step < options.steps; ++step) {
        const auto step_start = Clock::now();
        params.zero_grad();
        double loss = 0;
        long step_items = 0;
        for (long micro = 0; micro < options.grad_accum; ++micro) {
            // Only the last micro-batch's backward starts the averaging; earlier ones just accumulate.
            const bool last_micro = micro + 1 == options.grad_accum;
            if (last_micro) ddp.arm();
            MicroResult r = micro_step(step, micro);
            if (last_micro) ddp.finish();  // every bucket averaged over ranks
            loss += r.loss / static_cast<double>(options.grad_accum);
            step_items += r.items * dist::world_size();  // the job's throughput, all ranks
        }
        if (group) loss = dist::all_reduce_mean(loss);
        LEVERS_CHECK(std::isfinite(loss), "training diverged: loss is {} at step {} (try a lower lr)", loss, step);
        if (options.grad_accum > 1) scale_grads(params, 1.0f / static_cast<float>(options.grad_accum));
        norm = clip_grad_norm(params, options.grad_clip);
        lr = options.lr.at(step);
        optimizer.step(lr);
        st.step = step + 1;
        st.items += step_items;
        st.window_loss += loss;
        ++st.window_steps;
        window_items += step_items;
        items_here += step_items;
        if (metrics)
            metrics->train(st.step, loss, lr, norm, st.items, static_cast<double>(step_items) / seconds_since(step_start),
                           wall());

        const bool last = st.step == options.steps;
        if (st.step % options.log_every == 0 || last) {
            log_window();
        } else if (console.due()) {  // formatting only when something is drawn: this is every step
            const double rate = static_cast<double>(items_here) / (seconds_since(start) - eval_seconds);
            const double left = static_cast<double>(options.steps - st.step) * (seconds_since(start) - eval_seconds) /
                                static_cast<double>(st.step - options.start.step);
            console.redraw(fmt::format("step {:>5}/{} | loss {:.4f} | {:.0f} {}/s | {} left", st.step, options.steps,
                                       loss, rate, options.unit, duration(left)));
        }

        Metrics eval;
        const bool eval_now = options.eval_every > 0 && st.step % options.eval_every == 0;
        if (evaluate && (eval_now || last)) {
            eval = run_evaluation(st.step);
            result.last_eval = eval;
            if (!options.early_stop.metric.empty()) {
                const auto& es = options.early_stop;
                auto it = eval.find(es.metric);
                if (it == eval.end()) {
                    std::string have;
                    for (const auto& [name, v] : eval) have += (have.empty() ? "" : ", ") + name;
                    LEVERS_FAIL("early stopping watches '{}', but evaluation reports only: {}", es.metric, have);
                }
                const double gain = es.maximize ? it->second - st.best_metric : st.best_metric - it->second;
                bool stop = false;
                if (!st.have_best || gain > es.min_delta) {
                    st.have_best = true;
                    st.best_metric = it->second;
                    st.best_step = st.step;
                    st.evals_without_gain = 0;
                } else if (++st.evals_without_gain >= es.patience && !last) {
                    stop = true;
                }
                // The ranks' metrics agree, so do their decisions; the vote makes it certain.
                if (group) stop = dist::all_reduce_mean(stop ? 1.0 : 0.0) > 0;
                if (stop) {
                    console.line(fmt::format("early stop at step {}: {} has not improved on {:.4f} (step {}) for {} "
                                             "evaluations",
                                             st.step, es.metric, st.best_metric, st.best_step, st.evals_without_gain));
                    result.stopped_early = true;
                }
            }
        }
        st.train_seconds = wall();
        if (options.after_step) options.after_step(st, optimizer, eval.empty() ? nullptr : &eval);
        if (result.stopped_early) {
            if (st.window_steps > 0) log_window();
            break;
        }
    }
    result.steps = st.step;
    result.best_step = st.best_step;
    result.best_metric = st.best_metric;
    result.seconds = seconds_since(start);
    const double train_seconds = result.seconds - eval_seconds;
    result.items_per_second = static_cast<double>(items_here) / train_seconds;
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

#include "levers/train/loop_report.hpp"

#include "levers/train/metrics_log.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace levers::train {

LoopReport::LoopReport(const LoopOptions& options, bool main_rank)
    : options_(options),
      metrics_(main_rank ? options.metrics : nullptr),
      console_(options.live_progress),
      start_(Clock::now()),
      window_start_(start_),
      train_seconds_before_(options.start.train_seconds) {}

double LoopReport::train_seconds() const { return train_seconds_before_ + seconds_since(start_) - eval_seconds_; }

void LoopReport::log_window(LoopState& st, double lr, double grad_norm, LoopResult& result) {
    const double mean = st.window_loss / static_cast<double>(st.window_steps);
    std::string more;
    for (const auto& [name, sum] : window_metrics_)  // a histogram's bins (a/b/c) are for metrics.jsonl alone
        if (std::count(name.begin(), name.end(), '/') < 2)
            more += fmt::format(" | {} {:.4g}", name, sum / static_cast<double>(window_metric_steps_));
    console_.line(fmt::format("step {:>5}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} {}/s{}", st.step,
                              options_.steps, mean, lr, grad_norm,
                              static_cast<double>(window_items_) / seconds_since(window_start_), options_.unit, more));
    window_metrics_.clear();
    window_metric_steps_ = 0;
    result.loss = mean;
    st.last_loss = mean;
    result.loss_curve.emplace_back(st.step, mean);
    window_start_ = Clock::now();
    st.window_loss = 0;
    st.window_steps = 0;
    window_items_ = 0;
}

void LoopReport::stepped(LoopState& st, const StepGradients& grads, double lr, double grad_norm,
                         Clock::time_point began, LoopResult& result) {
    ++st.step;
    st.items += grads.items;
    st.window_loss += grads.loss;
    ++st.window_steps;
    window_items_ += grads.items;
    items_here_ += grads.items;
    for (const auto& [name, value] : grads.metrics) window_metrics_[name] += value;
    window_metric_steps_ += grads.metrics.empty() ? 0 : 1;
    if (metrics_)
        metrics_->train(st.step, grads.loss, lr, grad_norm, st.items,
                        static_cast<double>(grads.items) / seconds_since(began), train_seconds(), grads.metrics);
    if (st.step % options_.log_every == 0 || st.step == options_.steps) {
        log_window(st, lr, grad_norm, result);
    } else if (console_.due()) {  // formatting only when something is drawn: this is every step
        const double trained = seconds_since(start_) - eval_seconds_;
        const double left = static_cast<double>(options_.steps - st.step) * trained /
                            static_cast<double>(st.step - options_.start.step);
        console_.redraw(fmt::format("step {:>5}/{} | loss {:.4f} | {:.0f} {}/s | {} left", st.step, options_.steps,
                                    grads.loss, static_cast<double>(items_here_) / trained, options_.unit,
                                    duration_text(left)));
    }
    last_lr_ = lr;
    last_norm_ = grad_norm;
}

void LoopReport::stopping_early(const LoopState& st) { console_.line(stop_line(options_.early_stop, st)); }

void LoopReport::close_window(LoopState& st, LoopResult& result) {
    if (st.window_steps > 0) log_window(st, last_lr_, last_norm_, result);
}

void LoopReport::evaluated(long step, const Metrics& m, double seconds) {
    eval_seconds_ += seconds;
    console_.line(eval_line(step, m));
    if (metrics_) metrics_->eval(step, m, train_seconds());
    window_start_ = Clock::now();  // keep evaluation out of the throughput figures
}

double LoopReport::finish(LoopResult& result) const {
    if (metrics_) metrics_->flush();
    result.seconds = seconds_since(start_);
    const double trained = result.seconds - eval_seconds_;
    result.items_per_second = static_cast<double>(items_here_) / trained;
    return trained;
}

}  // namespace levers::train

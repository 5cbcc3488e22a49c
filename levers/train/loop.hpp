// The training loop every recipe uses: gradient accumulation, global-norm
// clipping, the learning-rate schedule, AdamW, periodic evaluation, early
// stopping, progress lines and the metrics files, and resuming where a saved
// LoopState left off. The model-specific work is a callback that runs forward
// and backward for one micro-batch. Its pieces: grad_accumulation (a step's
// gradients, averaged over ranks), early_stopping, progress_console,
// time_split, loop_state.
#pragma once

#include "levers/core/live_progress.hpp"
#include "levers/core/params.hpp"
#include "levers/train/early_stopping.hpp"
#include "levers/train/grad_accumulation.hpp"
#include "levers/train/loop_state.hpp"
#include "levers/train/lr_schedule.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/kernels/adamw.hpp"


#include <functional>
#include <map>
#include <string>
#include <vector>

namespace levers::train {

class MetricsLog;

struct LoopOptions {
    long steps = 100;
    long grad_accum = 1;  // micro-batches per optimizer step
    LrSchedule lr;
    kernels::AdamWHyper adamw;
    double grad_clip = 1.0;  // <= 0 disables clipping
    long log_every = 10;
    long eval_every = 0;     // 0: evaluate only after the last step
    bool eval_at_start = false;  // also evaluate before the first step
    std::string unit = "tok";  // what MicroResult::items counts, for the throughput column
    std::int64_t bucket_bytes = std::int64_t{25} << 20;  // gradient buckets averaged during backward (DDP's default)
    int zero = 0;  // 0: DDP; 1, 2: ZeRO stage (optimizer state; and gradients) sharded over ranks (dist::ParamSync)
    EarlyStopping early_stop;

    LoopState start;  // resume from here (default: the beginning)
    // Loads saved moments into the optimizer before the first step (resuming).
    std::function<void(AdamW&)> restore_optimizer;
    // Every rank, after each step and its evaluation (checkpoints); `eval` is
    // that step's evaluation or null.
    std::function<void(const LoopState&, const AdamW&, const Metrics* eval)> after_step;
    MetricsLog* metrics = nullptr;  // rank 0 writes a row per step and evaluation (may be null)
    LiveProgress live_progress = LiveProgress::off;  // redraw a progress line in place, and how

    void validate() const;  // throws levers::Error naming the bad option
};

struct LoopResult {
    long steps = 0;
    double loss = 0;            // mean training loss over the last log window
    double items_per_second = 0;  // training only, evaluation excluded
    double seconds = 0;           // wall time, evaluation included
    Metrics last_eval;          // from the final evaluation
    Metrics first_eval;         // from before training (eval_at_start)
    bool stopped_early = false;
    long best_step = 0;         // with early stopping: the evaluation that scored best
    double best_metric = 0;
    LoopState end;              // where the run stopped
    // Where this rank's training time went (evaluation excluded; the three add
    // up to it): computing, communication that backward did not hide, and
    // waiting at barriers for slower ranks. Plus the communication that ran
    // hidden behind backward on the communication thread.
    double compute_seconds = 0, communication_seconds = 0, waiting_seconds = 0, hidden_communication_seconds = 0;
    std::vector<std::pair<long, double>> loss_curve;  // (step, mean loss of its log window)
    // This rank's share of the flat buffers: AdamW's state (two moments) and
    // the gradients averaged for it (all of them unless ZeRO-2), in elements.
    std::int64_t optimizer_state_elements = 0, averaged_gradient_elements = 0;
    // The most this process's tensors held on the parameters' device from its
    // start through its first step (levers/core/tensor_memory.hpp): what
    // `recipe plan` predicts.
    std::size_t peak_tensor_bytes = 0;
};

// Runs options.steps optimizer steps. `micro_step(step, micro)` must add this
// micro-batch's gradients into params.grads(); the loop zeroes them before each
// step and divides by grad_accum after. `evaluate(step)` may be empty.
//
// Collective in a multi-rank job (every rank calls it): parameters start as
// rank 0's, gradients are averaged over ranks once per step (after the last
// micro-batch), logged losses are the mean over ranks, and only rank 0 prints.
// `evaluate` runs on every rank and must combine its metrics across ranks.
LoopResult train_loop(ParamSet& params, const LoopOptions& options,
                      const std::function<MicroResult(long step, long micro)>& micro_step,
                      const std::function<Metrics(long step)>& evaluate);

}  // namespace levers::train

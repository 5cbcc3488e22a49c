#include "levers/app/bench/bench_commands.hpp"

#include "levers/app/bench/bench_output.hpp"
#include "levers/app/bench/child_run.hpp"
#include "levers/core/error.hpp"
#include "levers/app/bench/scaling_model.hpp"

#include <fmt/format.h>

namespace levers::bench {

namespace fs = std::filesystem;

namespace {

void print_predictions(const Workload& w, const Interconnect& link, const std::vector<int>& gpus, const fs::path& dir) {
    std::vector<std::vector<std::string>> table = {
        {"GPUs", "comm_ms", "exposed_ms", "step_ms", "speedup", "efficiency"}};
    for (int g : gpus) {
        const auto p = predict(w, link, g);
        table.push_back({std::to_string(g), fmt::format("{:.2f}", 1000 * p.comm_seconds),
                         fmt::format("{:.2f}", 1000 * p.exposed_seconds), fmt::format("{:.2f}", 1000 * p.step_seconds),
                         fmt::format("{:.2f}x", p.speedup), fmt::format("{:.0f}%", 100 * p.efficiency)});
    }
    report(table, dir / "predict.csv", dir / "predict.md");
}

}  // namespace

int bench_predict(const PredictFlags& f) {
    Interconnect link = profile(f.profile);
    if (f.bandwidth_gb_s > 0) link.bandwidth_gb_s = f.bandwidth_gb_s;
    if (f.latency_us >= 0) link.latency_us = f.latency_us;
    for (int g : f.gpus) LEVERS_CHECK(g >= 1, "--gpus: {} is not a GPU count >= 1", g);
    Recipe r = find_recipe(f.recipe);
    const fs::path dir = bench_dir(r.name(), f.out, "predict");
    Workload w;
    w.fixed_global_batch = f.fixed_global_batch;
    w.step_seconds = f.step_ms / 1000;
    w.grad_bytes = f.grad_mb * (1 << 20);
    w.overlap = f.overlap;
    std::vector<std::string> quiet = quiet_sets(r);
    quiet.insert(quiet.end(), f.sets.begin(), f.sets.end());
    quiet = as_set_flags(quiet);
    if (w.step_seconds <= 0 || w.grad_bytes <= 0) {
        // One GPU's step and the gradients it averages, from a short run.
        auto args = quiet;
        args.insert(args.end(), {"--threads", "1", "--set", "steps=30"});
        auto one = run_child(r.name(), args, dir / "one_gpu");
        if (w.step_seconds <= 0) w.step_seconds = one.result.at("seconds").get<double>() / 30;
        if (w.grad_bytes <= 0) w.grad_bytes = 4.0 * one.result.at("trainable_parameters").get<double>();
    }
    if (w.overlap < 0) {
        // The share of communication levers hides behind backward, measured on 2 CPU ranks.
        auto args = quiet;
        args.insert(args.end(), {"--gpus", "2", "--threads", "1", "--output", "rank0", "--set", "steps=30"});
        auto two = run_child(r.name(), args, dir / "two_ranks");
        const auto& t = two.result.at("time_split");
        const double hidden = t.at("hidden_communication_s").get<double>(),
                     exposed = t.at("communication_s").get<double>();
        w.overlap = hidden + exposed > 0 ? hidden / (hidden + exposed) : 0;
    }
    if (f.bf16_gradients) w.grad_bytes /= 2;
    fmt::print("bench predict {} on {} ({:.0f} GB/s, {:.0f} us per hop): one GPU {:.2f} ms per step, {:.2f} MB of "
               "gradients{}, {:.0f}% of communication hidden, {}\n  profile: {}\n",
               r.name(), link.name, link.bandwidth_gb_s, link.latency_us, 1000 * w.step_seconds,
               w.grad_bytes / (1 << 20), f.bf16_gradients ? " (bf16)" : "", 100 * w.overlap,
               w.fixed_global_batch ? "global batch fixed" : "the same batch per GPU", link.source);
    print_predictions(w, link, f.gpus, dir);
    fmt::print("wrote {}/predict.csv and predict.md\n", dir.string());
    return 0;
}

int bench_predict_seeds() {
    // The seeds' fine-tune: 10,170 steps, the same steps on every GPU count
    // (the global batch fixed), GPUs joined through shared memory with P2P off.
    const double steps = 10170;
    const double t1 = 250 * 60 / steps;  // 4 h 10 min on one GPU
    const Interconnect& link = profile("pcie-nop2p");
    // Assumptions that reproduce the measurements: nothing overlapped, and
    // 0.778 GB of gradients averaged per step (e.g. 195M fp32 or 390M bf16 gradients).
    Workload seeds{.step_seconds = t1, .grad_bytes = 0.778e9, .overlap = 0, .fixed_global_batch = true};
    Workload levers_like = seeds;
    levers_like.overlap = 0.6;        // measured ~60% hidden on CPU ranks (bench/README.md)
    levers_like.grad_bytes /= 2;      // bf16 gradients, if the seeds' were fp32
    fmt::print("The seeds' fine-tune (10,170 steps, RTX PRO 6000, shared memory, P2P disabled) against the model on\n"
               "pcie-nop2p ({:.0f} GB/s, {:.0f} us), assuming no overlap and 0.778 GB of gradients per step:\n\n",
               link.bandwidth_gb_s, link.latency_us);
    const double measured_min[] = {250, 136, 79};
    fmt::print("| GPUs | measured | model | model speedup | with 60% overlap + bf16 gradients |\n|---|---|---|---|---|\n");
    int i = 0;
    for (int g : {1, 2, 4}) {
        const auto p = predict(seeds, link, g), q = predict(levers_like, link, g);
        fmt::print("| {} | {:.0f} min ({:.2f}x) | {:.0f} min | {:.2f}x | {:.0f} min ({:.2f}x) |\n", g, measured_min[i],
                   measured_min[0] / measured_min[i], p.step_seconds * steps / 60, p.speedup,
                   q.step_seconds * steps / 60, q.speedup);
        ++i;
    }
    return 0;
}

}  // namespace levers::bench

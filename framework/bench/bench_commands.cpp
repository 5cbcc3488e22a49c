#include "framework/bench/bench_commands.hpp"

#include "framework/bench/child_run.hpp"
#include "framework/bench/scaling_model.hpp"
#include "framework/core/error.hpp"
#include "framework/launch/card_ledger.hpp"
#include "framework/recipe/plot.hpp"
#include "framework/recipe/run_dir.hpp"
#include "framework/recipe/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <fstream>

namespace levers::bench {

namespace fs = std::filesystem;

namespace {

// Prints `rows` (the first is the header) as an aligned console table and
// writes them as CSV and as a Markdown table.
void report(const std::vector<std::vector<std::string>>& rows, const fs::path& csv, const fs::path& markdown) {
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (std::size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
    std::ofstream c(csv), md(markdown);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        std::string line;
        for (std::size_t k = 0; k < rows[r].size(); ++k) line += fmt::format("{:>{}}  ", rows[r][k], width[k]);
        fmt::print("{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
        c << fmt::format("{}\n", fmt::join(rows[r], ","));
        md << fmt::format("| {} |\n", fmt::join(rows[r], " | "));
        if (r == 0) md << fmt::format("|{}\n", fmt::join(std::vector<std::string>(rows[0].size(), "---|"), ""));
    }
    LEVERS_CHECK(c.good() && md.good(), "cannot write {} or {}", csv.string(), markdown.string());
}

std::string unit_of(const Result& r) { return r.contains("tokens_per_second") ? "tok/s" : "samples/s"; }

std::vector<int> default_gpus() {
    const int cards = static_cast<int>(launch::CardLedger::for_node().cards().size());
    std::vector<int> out;
    for (int g = 1; g <= std::min(cards, 8); g *= 2) out.push_back(g);
    return out;
}

fs::path bench_dir(const std::string& recipe, const std::string& out, const std::string& kind) {
    return make_run_dir(recipe, out, "bench-" + kind + "-");
}

// Per-step milliseconds of a part of the run's time split.
double split_ms(const Result& r, const char* part) {
    return 1000.0 * r.at("time_split").at(part).get<double>() / r.at("steps").get<double>();
}

}  // namespace

int bench_scaling(const ScalingFlags& f) {
    Plan r = find_recipe(f.recipe);
    const std::vector<int> gpus = f.gpus.empty() ? default_gpus() : f.gpus;
    LEVERS_CHECK(!gpus.empty(), "--gpus needs at least one card count");
    for (int g : gpus) LEVERS_CHECK(g >= 1, "--gpus: {} is not a card count >= 1", g);
    LEVERS_CHECK(f.steps > f.warmup && f.warmup >= 0, "--steps ({}) must exceed --warmup ({})", f.steps, f.warmup);
    LEVERS_CHECK(f.global_batch == 0 || r.defaults().has("global_batch"),
                 "--global-batch: recipe '{}' declares no global_batch parameter", r.name());
    LEVERS_CHECK(f.price >= 0, "--price must be >= 0, got {}", f.price);
    const fs::path dir = bench_dir(r.name(), f.out, "scaling");
    const int slots = static_cast<int>(launch::CardLedger::for_node().cards().size());
    fmt::print("bench scaling {}: cards {}, {} steps each ({} warm-up), {}; results in {}\n", r.name(),
               fmt::join(gpus, ","), f.steps, f.warmup,
               f.global_batch > 0 ? fmt::format("global batch {} split over the cards", f.global_batch)
                                  : std::string("the same batch per card"),
               dir.string());
    std::fflush(stdout);

    struct Row {
        int cards;
        double throughput;
        Result result;
    };
    std::vector<Row> rows;
    for (int g : gpus) {
        if (g * f.threads > slots)
            fmt::print("note: {} cards x {} thread{} exceed this node's {} CPU slots: ranks share cores\n", g,
                       f.threads, f.threads == 1 ? "" : "s", slots);
        std::vector<std::string> args = {"--gpus", std::to_string(g), "--threads", std::to_string(f.threads),
                                         "--output", "rank0", "--set", fmt::format("steps={}", f.steps)};
        if (f.global_batch > 0) args.insert(args.end(), {"--set", fmt::format("global_batch={}", f.global_batch)});
        for (const auto& s : quiet_sets(r)) args.push_back(s);
        for (const auto& s : f.sets) args.insert(args.end(), {"--set", s});
        auto run = run_child(r.name(), args, dir / fmt::format("cards{}", g));
        rows.push_back({g, steady_throughput(run.dir, f.warmup), run.result});
        fmt::print("  {} card{}: {:.0f} {}\n", g, g == 1 ? "" : "s", rows.back().throughput, unit_of(run.result));
        std::fflush(stdout);
    }

    const long total = f.total_steps > 0 ? f.total_steps : r.defaults().get<long>("steps");
    std::vector<std::vector<std::string>> table = {{"cards", unit_of(rows.front().result), "speedup", "efficiency",
                                                    "step_ms", "compute_ms", "exposed_comm_ms", "waiting_ms",
                                                    "hidden_comm_ms", "peak_mb_per_rank"}};
    if (f.price > 0) table[0].insert(table[0].end(), {"hours", "cost"});
    // Items in the priced work: `total` steps at the smallest count's items per step.
    const Result& first = rows.front().result;
    const double work_items = static_cast<double>(total) * first.at("items_per_second").get<double>() *
                              first.at("seconds").get<double>() / first.at("steps").get<double>();
    std::ofstream plot_data(dir / "speedup.dat");
    for (const auto& row : rows) {
        // Speedup against one card's rate (the smallest count's, per card).
        const double rel = row.throughput / rows.front().throughput * rows.front().cards;
        double peak = 0;
        for (const auto& m : row.result.at("peak_rss_mb")) peak = std::max(peak, m.get<double>());
        // Training time per step (evaluation left out): the three parts of the split add up to it.
        const double step_ms = split_ms(row.result, "compute_s") + split_ms(row.result, "communication_s") +
                               split_ms(row.result, "waiting_s");
        std::vector<std::string> cells = {std::to_string(row.cards), fmt::format("{:.0f}", row.throughput),
                                          fmt::format("{:.2f}x", rel), fmt::format("{:.0f}%", 100 * rel / row.cards),
                                          fmt::format("{:.1f}", step_ms),
                                          fmt::format("{:.1f}", split_ms(row.result, "compute_s")),
                                          fmt::format("{:.1f}", split_ms(row.result, "communication_s")),
                                          fmt::format("{:.1f}", split_ms(row.result, "waiting_s")),
                                          fmt::format("{:.1f}", split_ms(row.result, "hidden_communication_s")),
                                          fmt::format("{:.0f}", peak)};
        if (f.price > 0) {
            const double hours = work_items / row.throughput / 3600.0;
            cells.insert(cells.end(), {fmt::format("{:.3f}", hours), fmt::format("{:.3f}", hours * row.cards * f.price)});
        }
        table.push_back(std::move(cells));
        plot_data << fmt::format("{} {} {}\n", row.cards, rel, row.cards);
    }
    plot_data.close();
    report(table, dir / "scaling.csv", dir / "scaling.md");
    if (f.price > 0)
        fmt::print("(hours and cost: the work of {} steps at {} card{}, at {} per card-hour)\n", total,
                   rows.front().cards, rows.front().cards == 1 ? "" : "s", f.price);
    const int top = rows.back().cards;
    run_gnuplot(fmt::format("set terminal pngcairo size 700,500 font ',10'\nset output {}\nset termoption noenhanced\n"
                            "set title 'recipe {}: speedup against cards'\nset xlabel 'cards'\nset ylabel 'speedup'\n"
                            "set key top left\nset grid\nset xrange [0.8:{}]\nset yrange [0:{}]\n"
                            "plot {} using 1:3 with lines dt 2 title 'ideal', {} using 1:2 with linespoints lw 2 "
                            "pt 7 title 'measured'\n",
                            gnuplot_quoted((dir / "scaling.png").string()), r.name(), top * 1.1, top * 1.1,
                            gnuplot_quoted((dir / "speedup.dat").string()),
                            gnuplot_quoted((dir / "speedup.dat").string())),
                dir / "scaling.png");
    fmt::print("wrote {}/scaling.csv, scaling.md and scaling.png\n", dir.string());
    return 0;
}

int bench_shapes(const ShapesFlags& f) {
    Plan r = find_recipe(f.recipe);
    LEVERS_CHECK(f.cells >= 2, "--cells must be >= 2, got {}", f.cells);
    LEVERS_CHECK(f.steps >= 1, "--steps must be >= 1, got {}", f.steps);
    LEVERS_CHECK(r.defaults().has("seed"), "recipe '{}' declares no seed: its cells could not differ", r.name());
    const fs::path dir = bench_dir(r.name(), f.out, "shapes");
    fmt::print("bench shapes {}: {} one-card cells as a sweep against one {}-card run of the same total work, "
               "{} steps; results in {}\n", r.name(), f.cells, f.cells, f.steps, dir.string());
    std::fflush(stdout);
    std::vector<std::string> common = {fmt::format("steps={}", f.steps)};
    for (std::size_t i = 1; i < quiet_sets(r).size(); i += 2) common.push_back(quiet_sets(r)[i]);
    common.insert(common.end(), f.sets.begin(), f.sets.end());
    std::vector<std::string> one_args = {"--threads", "1"};
    for (const auto& s : common) one_args.insert(one_args.end(), {"--set", s});

    auto one = run_child(r.name(), one_args, dir / "one_cell");
    fmt::print("  one cell alone: {:.2f} s\n", one.wall_seconds);

    SweepOptions o;
    o.recipe = r.name();
    for (int c = 0; c < f.cells; ++c) o.cells.push_back({{"seed", std::to_string(c + 1)}});
    o.sets = common;
    o.program = fs::read_symlink("/proc/self/exe").string();
    o.dir = dir / "sweep";
    fs::create_directories(o.dir);
    const auto t0 = std::chrono::steady_clock::now();
    auto cells = run_sweep(o);
    const double sweep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& c : cells) LEVERS_CHECK(c.ok, "a sweep cell failed: {} (log {})", c.error, c.log.string());
    fmt::print("  {} cells as a sweep: {:.2f} s\n", f.cells, sweep_s);

    auto args = one_args;
    args.insert(args.begin(), {"--gpus", std::to_string(f.cells), "--output", "rank0"});
    auto together = run_child(r.name(), args, dir / "distributed");
    fmt::print("  one {}-card run: {:.2f} s\n", f.cells, together.wall_seconds);

    const double work = f.cells;  // in units of one cell's training
    report({{"shape", "wall_s", "cells_of_work_per_hour", "vs_one_cell"},
            {"one cell alone", fmt::format("{:.2f}", one.wall_seconds), fmt::format("{:.1f}", 3600 / one.wall_seconds),
             "1.00x"},
            {fmt::format("{} cells as a sweep", f.cells), fmt::format("{:.2f}", sweep_s),
             fmt::format("{:.1f}", work * 3600 / sweep_s), fmt::format("{:.2f}x", work * one.wall_seconds / sweep_s)},
            {fmt::format("one {}-card run", f.cells), fmt::format("{:.2f}", together.wall_seconds),
             fmt::format("{:.1f}", work * 3600 / together.wall_seconds),
             fmt::format("{:.2f}x", work * one.wall_seconds / together.wall_seconds)}},
           dir / "shapes.csv", dir / "shapes.md");
    fmt::print("(vs_one_cell: the work done per second against one cell alone; {} is ideal)\n", f.cells);
    return 0;
}

namespace {

void print_predictions(const Workload& w, const Interconnect& link, const std::vector<int>& gpus, const fs::path& dir) {
    std::vector<std::vector<std::string>> table = {
        {"cards", "comm_ms", "exposed_ms", "step_ms", "speedup", "efficiency"}};
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
    for (int g : f.gpus) LEVERS_CHECK(g >= 1, "--gpus: {} is not a card count >= 1", g);
    Plan r = find_recipe(f.recipe);
    const fs::path dir = bench_dir(r.name(), f.out, "predict");
    Workload w;
    w.fixed_global_batch = f.fixed_global_batch;
    w.step_seconds = f.step_ms / 1000;
    w.grad_bytes = f.grad_mb * (1 << 20);
    w.overlap = f.overlap;
    std::vector<std::string> quiet = quiet_sets(r);
    for (const auto& s : f.sets) quiet.insert(quiet.end(), {"--set", s});
    if (w.step_seconds <= 0 || w.grad_bytes <= 0) {
        // One card's step and the gradients it averages, from a short run.
        auto args = quiet;
        args.insert(args.end(), {"--threads", "1", "--set", "steps=30"});
        auto one = run_child(r.name(), args, dir / "one_card");
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
    fmt::print("bench predict {} on {} ({:.0f} GB/s, {:.0f} us per hop): one card {:.2f} ms per step, {:.2f} MB of "
               "gradients{}, {:.0f}% of communication hidden, {}\n  profile: {}\n",
               r.name(), link.name, link.bandwidth_gb_s, link.latency_us, 1000 * w.step_seconds,
               w.grad_bytes / (1 << 20), f.bf16_gradients ? " (bf16)" : "", 100 * w.overlap,
               w.fixed_global_batch ? "global batch fixed" : "the same batch per card", link.source);
    print_predictions(w, link, f.gpus, dir);
    fmt::print("wrote {}/predict.csv and predict.md\n", dir.string());
    return 0;
}

int bench_predict_seeds() {
    // The seeds' fine-tune: 10,170 steps, the same steps on every card count
    // (the global batch fixed), cards joined through shared memory with P2P off.
    const double steps = 10170;
    const double t1 = 250 * 60 / steps;  // 4 h 10 min on one card
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
    fmt::print("| cards | measured | model | model speedup | with 60% overlap + bf16 gradients |\n|---|---|---|---|---|\n");
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

#include "levers/app/bench/bench_commands.hpp"

#include "levers/app/bench/bench_output.hpp"
#include "levers/app/bench/child_run.hpp"
#include "levers/core/error.hpp"
#include "levers/launch/slot_ledger.hpp"
#include "levers/recipe/device_choice.hpp"
#include "levers/app/plot.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>

namespace levers::bench {

namespace fs = std::filesystem;

namespace {

std::string unit_of(const Result& r) { return r.contains("tokens_per_second") ? "tok/s" : "samples/s"; }

// Per-step milliseconds of a part of the run's time split.
double split_ms(const Result& r, const char* part) {
    return 1000.0 * r.at("time_split").at(part).get<double>() / r.at("steps").get<double>();
}

}  // namespace

int bench_scaling(const ScalingFlags& f) {
    Recipe r = find_recipe(f.recipe);
    const std::vector<int> gpus = f.gpus.empty() ? default_gpus() : f.gpus;
    LEVERS_CHECK(!gpus.empty(), "--gpus needs at least one GPU count");
    for (int g : gpus) LEVERS_CHECK(g >= 1, "--gpus: {} is not a GPU count >= 1", g);
    LEVERS_CHECK(f.steps > f.warmup && f.warmup >= 0, "--steps ({}) must exceed --warmup ({})", f.steps, f.warmup);
    LEVERS_CHECK(f.global_batch == 0 || r.defaults().has(settings::global_batch.name()),
                 "--global-batch: recipe '{}' declares no global_batch parameter", r.name());
    LEVERS_CHECK(f.price >= 0, "--price must be >= 0, got {}", f.price);
    resolve_precision(f.precision, resolve_device("auto", 1));  // refused here, not once per run
    const fs::path dir = bench_dir(r.name(), f.out, "scaling");
    const int slots = static_cast<int>(launch::SlotLedger::for_node().slots().size());
    fmt::print("bench scaling {}: GPUs {}, {} steps each ({} warm-up), {}; results in {}\n", r.name(),
               fmt::join(gpus, ","), f.steps, f.warmup,
               f.global_batch > 0 ? fmt::format("global batch {} split over the GPUs", f.global_batch)
                                  : std::string("the same batch per GPU"),
               dir.string());
    std::fflush(stdout);

    struct Row {
        int gpus;
        double throughput;
        Result result;
    };
    std::vector<Row> rows;
    for (int g : gpus) {
        if (g * f.threads > slots)
            fmt::print("note: {} GPUs x {} thread{} exceed this node's {} CPU slots: ranks share cores\n", g,
                       f.threads, f.threads == 1 ? "" : "s", slots);
        std::vector<std::string> args = {"--gpus",      std::to_string(g), "--threads", std::to_string(f.threads),
                                         "--output",    "rank0",           "--set",     fmt::format("steps={}", f.steps),
                                         "--precision", f.precision};
        if (f.global_batch > 0) args.insert(args.end(), {"--set", fmt::format("global_batch={}", f.global_batch)});
        for (const auto& flag : as_set_flags(quiet_sets(r))) args.push_back(flag);
        for (const auto& flag : as_set_flags(f.sets)) args.push_back(flag);
        auto run = run_child(r.name(), args, dir / fmt::format("GPUs{}", g));
        rows.push_back({g, steady_throughput(run.dir, f.warmup), run.result});
        fmt::print("  {} GPU{}: {:.0f} {}\n", g, g == 1 ? "" : "s", rows.back().throughput, unit_of(run.result));
        std::fflush(stdout);
    }

    const long total = f.total_steps > 0 ? f.total_steps : r.defaults()[settings::steps];
    std::vector<std::vector<std::string>> table = {{"GPUs", unit_of(rows.front().result), "speedup", "efficiency",
                                                    "step_ms", "compute_ms", "exposed_comm_ms", "waiting_ms",
                                                    "hidden_comm_ms", "peak_mb_per_rank"}};
    if (f.price > 0) table[0].insert(table[0].end(), {"hours", "cost"});
    // Items in the priced work: `total` steps at the smallest count's items per step.
    const double work_items = static_cast<double>(total) * items_per_step(dir / fmt::format("GPUs{}", rows.front().gpus));
    std::ofstream plot_data(dir / "speedup.dat");
    for (const auto& row : rows) {
        // Speedup against one GPU's rate (the smallest count's, per GPU).
        const double rel = row.throughput / rows.front().throughput * rows.front().gpus;
        double peak = 0;
        for (const auto& m : row.result.at("peak_rss_mb")) peak = std::max(peak, m.get<double>());
        // Training time per step (evaluation left out): the three parts of the split add up to it.
        const double step_ms = split_ms(row.result, "compute_s") + split_ms(row.result, "communication_s") +
                               split_ms(row.result, "waiting_s");
        std::vector<std::string> cells = {std::to_string(row.gpus), fmt::format("{:.0f}", row.throughput),
                                          fmt::format("{:.2f}x", rel), fmt::format("{:.0f}%", 100 * rel / row.gpus),
                                          fmt::format("{:.1f}", step_ms),
                                          fmt::format("{:.1f}", split_ms(row.result, "compute_s")),
                                          fmt::format("{:.1f}", split_ms(row.result, "communication_s")),
                                          fmt::format("{:.1f}", split_ms(row.result, "waiting_s")),
                                          fmt::format("{:.1f}", split_ms(row.result, "hidden_communication_s")),
                                          fmt::format("{:.0f}", peak)};
        if (f.price > 0) {
            const double hours = work_items / row.throughput / 3600.0;
            cells.insert(cells.end(), {fmt::format("{:.3f}", hours), fmt::format("{:.3f}", hours * row.gpus * f.price)});
        }
        table.push_back(std::move(cells));
        plot_data << fmt::format("{} {} {}\n", row.gpus, rel, row.gpus);
    }
    plot_data.close();
    report(table, dir / "scaling.csv", dir / "scaling.md");
    if (f.price > 0)
        fmt::print("(hours and cost: the work of {} steps at {} GPU{}, at {} per GPU-hour)\n", total,
                   rows.front().gpus, rows.front().gpus == 1 ? "" : "s", f.price);
    const int top = rows.back().gpus;
    run_gnuplot(fmt::format("set terminal pngcairo size 700,500 font ',10'\nset output {}\nset termoption noenhanced\n"
                            "set title 'recipe {}: speedup against GPUs'\nset xlabel 'GPUs'\nset ylabel 'speedup'\n"
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

}  // namespace levers::bench

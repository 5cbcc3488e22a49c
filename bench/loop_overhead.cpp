// The training loop's fixed cost per step, on the user project's small
// models (examples/user_project: the CNN at 16 channels, 20,490 parameters;
// the residual MLP at width 24, 20,410 parameters, and at its recipe's width
// 256), on real Fashion-MNIST batches drawn as the recipes draw them. Each
// round runs, on the same model and data, alternating:
//  - step:   the user's micro-step alone (gather the batch, forward, the
//            loss, backward; the gradients zeroed before it);
//  - manual: a hand-written loop: that, global-norm clipping and AdamW, as a
//            PyTorch user writes it;
//  - loop:   train::train_loop as recipes call it: clipping, the schedule,
//            AdamW, a progress line every 10 steps and a metrics row every
//            step (written to a temporary folder);
//  - hollow: train_loop as above around a micro-step that only returns its
//            loss: the loop's fixed cost alone, free of the noise of a whole
//            step's time (the difference loop - step is within it).
// Prints the progress lines, then one JSON object: each kind's median ms a
// step over the rounds, the loop's fixed cost (hollow) in µs and as a share of
// the loop's step, the difference loop - step, and the framework's own part
// (loop - manual).
//
//   bench_loop_overhead --model cnn|mlp_20k|mlp [--threads N] [--steps N] [--rounds N]
#include "bench/timing.hpp"
#include "examples/user_project/residual_mlp.hpp"
#include "examples/user_project/small_cnn.hpp"
#include "levers/core/threads.hpp"
#include "levers/data/batcher.hpp"
#include "levers/data/idx.hpp"
#include "levers/train/loop.hpp"
#include "levers/train/metrics_log.hpp"
#include "levers/train/param_kernels.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>

#include <unistd.h>

using namespace levers;

namespace {
double ms_per_step(long steps, const std::function<void()>& run) {
    return bench::ms_of(run) / static_cast<double>(steps);
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("The training loop's fixed cost per step on small models", "bench_loop_overhead");
    std::string model = "cnn";
    int threads = 1, rounds = 5;
    long steps = 300;
    app.add_option("--model", model, "cnn (16 channels), mlp_20k (width 24) or mlp (width 256)")
        ->check(CLI::IsMember({"cnn", "mlp_20k", "mlp"}));
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "steps a run")->check(CLI::PositiveNumber);
    app.add_option("--rounds", rounds, "rounds of the three runs (medians are reported)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);

    // The recipes' models and batches: fashion_cnn's 64 images a step, fashion's 128.
    std::unique_ptr<nn::Layer> net;
    std::int64_t batch = 64;
    if (model == "cnn") {
        net = std::make_unique<user::SmallCnn>(16, 1);
    } else {
        net = std::make_unique<user::ResidualMlp>(model == "mlp" ? 256 : 24, 2, 1);
        batch = 128;
    }
    ParamSet& params = net->params();
    const std::filesystem::path dir = data::fashion_mnist_dir();
    const data::ImageSet train = data::map_idx_images(dir / "train-images-idx3-ubyte.gz",
                                                      dir / "train-labels-idx1-ubyte.gz", 10);
    data::Batcher batcher(train.count(), batch, 1, data::Batcher::Order::epochs, 1, 0);
    const auto micro = [&] {
        Tensor x, y;
        train.gather(batcher.next(), x, y);
        const Tensor loss = ops::cross_entropy((*net)(x), y);
        loss.backward();
        return train::MicroResult{loss.item(), static_cast<long>(x.dim(0))};
    };

    const std::filesystem::path metrics_dir =
        std::filesystem::temp_directory_path() / fmt::format("levers-loop-overhead-{}", ::getpid());
    std::vector<double> step_ms, manual_ms, loop_ms, hollow_ms;
    for (int round = 0; round < rounds; ++round) {
        step_ms.push_back(ms_per_step(steps, [&] {
            for (long s = 0; s < steps; ++s) {
                params.zero_grad();
                micro();
            }
        }));
        manual_ms.push_back(ms_per_step(steps, [&] {
            train::AdamW adamw(params, {.lr = 2e-3});
            for (long s = 0; s < steps; ++s) {
                params.zero_grad();
                micro();
                train::clip_grad_norm(params, 1.0);
                adamw.step(2e-3);
            }
        }));
        const auto loop = [&](const std::function<train::MicroResult()>& micro_step) {
            std::filesystem::remove_all(metrics_dir);
            std::filesystem::create_directories(metrics_dir);
            train::MetricsLog metrics(metrics_dir);
            train::LoopOptions options;
            options.steps = steps;
            options.lr = {.peak = 2e-3, .warmup = 50, .total = steps};
            options.metrics = &metrics;
            return ms_per_step(steps, [&] {
                train::train_loop(params, options, [&](long, long) { return micro_step(); }, {});
            });
        };
        loop_ms.push_back(loop(micro));
        hollow_ms.push_back(loop([&] { return train::MicroResult{2.3, batch}; }));
    }
    std::filesystem::remove_all(metrics_dir);
    const double step = bench::median(step_ms), manual = bench::median(manual_ms), loop = bench::median(loop_ms),
                 hollow = bench::median(hollow_ms);
    nlohmann::json row = {{"model", model},
                          {"parameters", params.size()},
                          {"batch", batch},
                          {"threads", threads},
                          {"steps", steps},
                          {"step_ms", step},
                          {"manual_ms", manual},
                          {"loop_ms", loop},
                          {"fixed_us", hollow * 1000},
                          {"fixed_share", hollow / loop},
                          {"difference_us", (loop - step) * 1000},
                          {"framework_us", (loop - manual) * 1000}};
    fmt::print("{}\n", row.dump());
    return 0;
}

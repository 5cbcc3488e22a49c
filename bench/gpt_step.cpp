// One GPT training step on the CPU, timed: forward, backward, clipping, AdamW,
// on a real text's ids (--ids) or random ones. Prints one JSON object;
// bench/cpu_step.sh and gpt2_cpu.sh run it beside the PyTorch peer.
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/core/rng.hpp"
#include "levers/core/threads.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/train/param_kernels.hpp"
#include "levers/models/gpt.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sys/resource.h>

int main(int argc, char** argv) {
    CLI::App app("Times GPT training steps on the CPU and reports tokens/s and memory.", "bench_gpt_step");
    int threads = 1, steps = 10, warmup = 3;
    levers::models::GptConfig shape;
    long batch = 16;
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
    app.add_option("--warmup", warmup, "untimed steps first");
    app.add_option("--batch", batch, "sequences per step")->check(CLI::PositiveNumber);
    app.add_option("--block", shape.block_size, "context length");
    app.add_option("--layers", shape.n_layer, "transformer blocks");
    app.add_option("--heads", shape.n_head, "attention heads");
    app.add_option("--embd", shape.n_embd, "model width");
    app.add_option("--vocab", shape.vocab_size, "vocabulary size");
    std::string ids_file;
    app.add_option("--ids", ids_file, "a JSON array of token ids of a real text (default: random ids)");
    bool checkpoint = false;
    app.add_flag("--checkpoint", checkpoint, "recompute each block's activations during backward");
    CLI11_PARSE(app, argc, argv);

    levers::set_threads(threads);
    levers::models::Gpt model(shape, 1);
    model.checkpoint_blocks(checkpoint);
    levers::train::AdamW adamw(model.params(), {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                                .weight_decay = 0.1});
    const long tokens = batch * shape.block_size;
    std::vector<std::int32_t> x(static_cast<std::size_t>(tokens)), y(x.size());
    if (!ids_file.empty()) {
        // Row r: the text's ids [r (block + 1), (r + 1)(block + 1)), inputs and their next ids, as the peer takes them.
        const auto text = nlohmann::json::parse(levers::read_file(ids_file)).get<std::vector<std::int32_t>>();
        const auto row = static_cast<std::size_t>(shape.block_size + 1);
        LEVERS_CHECK(text.size() >= static_cast<std::size_t>(batch) * row, "--ids: {} ids, fewer than {}", text.size(),
                     static_cast<std::size_t>(batch) * row);
        for (std::size_t r = 0; r < static_cast<std::size_t>(batch); ++r)
            for (std::size_t t = 0; t + 1 < row; ++t) {
                const std::int32_t id = text[r * row + t], next = text[r * row + t + 1];
                LEVERS_CHECK(id >= 0 && id < shape.vocab_size && next >= 0 && next < shape.vocab_size,
                             "--ids: id {} outside the vocabulary of {}", std::max(id, next), shape.vocab_size);
                x[r * (row - 1) + t] = id;
                y[r * (row - 1) + t] = next;
            }
    } else {
        levers::Rng rng(2);
        for (auto& t : x) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(shape.vocab_size)));
        for (auto& t : y) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(shape.vocab_size)));
    }
    const levers::Tensor inputs = levers::Tensor::from(x, {batch, shape.block_size});
    const levers::Tensor targets = levers::Tensor::from(y, {batch, shape.block_size});

    std::vector<double> times;
    double loss = 0;
    for (int s = 0; s < warmup + steps; ++s) {
        auto t0 = std::chrono::steady_clock::now();
        model.params().zero_grad();
        const levers::Tensor l = model.loss(inputs, targets);
        l.backward();
        loss = l.item();
        levers::train::clip_grad_norm(model.params(), 1.0);
        adamw.step(1e-3);
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s >= warmup) times.push_back(dt);
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const double param_bytes = static_cast<double>(model.params().size()) * 4;
    nlohmann::json out = {
        {"impl", "levers"},
        {"threads", threads},
        {"checkpoint", checkpoint},
        {"parameters", shape.parameter_count()},
        {"tokens_per_step", tokens},
        {"inputs", ids_file.empty() ? "random" : "text"},
        {"median_step_ms", median * 1e3},
        {"tokens_per_second", static_cast<double>(tokens) / median},
        {"final_loss", loss},
        {"peak_rss_mb", static_cast<double>(usage.ru_maxrss) / 1024.0},
        // parameters + gradients + AdamW's two moments, and the activations kept for backward
        {"model_state_mb", 4 * param_bytes / 1048576.0},
        {"activations_mb", static_cast<double>(model.activation_bytes()) / 1048576.0},
    };
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

// A language model's head and loss over Llama 3's vocabulary (128,256
// tokens): the chunked op (levers/kernels/chunked_cross_entropy.hpp) against the
// same loss with the logits materialised whole (linear_cross_entropy), in
// one process: forward + backward time (median) and the storage pool's peak
// (what the step held at once), each measured alone. One JSON line per way.
//
//   bench_chunked_loss [--rows 1024] [--hidden 512] [--vocab 128256] [--threads N] [--steps 5]
#include "levers/core/rng.hpp"
#include "levers/core/storage_pool.hpp"
#include "levers/core/threads.hpp"
#include "levers/kernels/chunked_cross_entropy.hpp"
#include "levers/kernels/linear_cross_entropy.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

using namespace levers;

namespace {
Tensor normals(Shape shape, std::uint64_t seed, double scale) {
    Rng rng(seed);
    std::vector<float> v(static_cast<std::size_t>(shape.numel()));
    for (float& x : v) x = static_cast<float>(scale * rng.normal());
    return Tensor::from(v, shape);
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("The chunked head-and-loss against materialised logits", "bench_chunked_loss");
    std::int64_t rows = 1024, hidden = 512, vocab = 128256;
    int threads = 2, steps = 5;
    app.add_option("--rows", rows, "tokens scored per step")->check(CLI::PositiveNumber);
    app.add_option("--hidden", hidden, "the model's width")->check(CLI::PositiveNumber);
    app.add_option("--vocab", vocab, "vocabulary")->check(CLI::PositiveNumber);
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed steps (the median is reported)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    Tensor x = normals({rows, hidden}, 1, 1.0).requires_grad_();
    Tensor w = normals({vocab, hidden}, 2, 0.02).requires_grad_();
    std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919) % vocab);
    const Tensor targets = Tensor::from(ids, {rows});
    for (const char* way : {"materialised", "chunked"}) {
        const bool chunked = std::string(way) == "chunked";
        std::vector<double> ms;
        double loss = 0;
        cpu_pool().release_cached();
        cpu_pool().reset_peak();
        for (int i = 0; i < steps + 1; ++i) {
            const auto start = std::chrono::steady_clock::now();
            const Tensor l = chunked ? ops::chunked_linear_cross_entropy(x, w, targets)
                                     : ops::linear_cross_entropy(x, w, targets);
            l.backward();
            loss = l.item();
            if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(ms.begin(), ms.end());
        // The logits held at once: every row's, or one chunk's (2^26 values by default).
        const std::int64_t held_rows = chunked ? std::min(rows, ops::loss_chunk_rows(0, vocab)) : rows;
        const double logits_mb = static_cast<double>(held_rows * vocab * 4) / (1 << 20);
        fmt::print("{}\n", nlohmann::json{{"way", way}, {"rows", rows}, {"hidden", hidden}, {"vocab", vocab},
                                          {"threads", threads}, {"median_step_ms", ms[ms.size() / 2]},
                                          {"peak_pool_mb", static_cast<double>(cpu_pool().stats().peak) / (1 << 20)},
                                          {"logits_held_mb", logits_mb}, {"loss", loss}}
                               .dump());
    }
    return 0;
}

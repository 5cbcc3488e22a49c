// Sliding-window attention against global attention at one layer's shape
// (Gemma 3 1B's: 4 query heads sharing 1 key-value head of 256, by default),
// a training step's attention (the fused op forward and backward) over T
// positions, the two alternated so that machine noise hits both: with a
// window, each query reads at most `window` keys, so the time should grow
// with the window, not with T. One JSON line per kind.
//
//   bench_sliding_window [--time 4096] [--window 512] [--heads 4] [--kv-heads 1] [--head-dim 256] [--threads 2] [--steps 5]
#include "levers/core/rng.hpp"
#include "levers/core/threads.hpp"
#include "levers/kernels/causal_attention.hpp"
#include "levers/kernels/reduce.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>

using namespace levers;

namespace {
// Random q, k or v, to train: the kernel's work does not depend on the values.
Tensor random_input(Shape shape, Rng& rng) {
    std::vector<float> values(static_cast<std::size_t>(shape.numel()));
    std::generate(values.begin(), values.end(), [&] { return static_cast<float>(rng.normal()); });
    return Tensor::from(values, shape).requires_grad_();
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("Sliding-window attention against global attention", "bench_sliding_window");
    std::int64_t time = 4096, window = 512, heads = 4, kv_heads = 1, head_dim = 256;
    int threads = 2, steps = 5;
    app.add_option("--time", time, "positions")->check(CLI::PositiveNumber);
    app.add_option("--window", window, "keys a query sees, itself included")->check(CLI::PositiveNumber);
    app.add_option("--heads", heads, "query heads")->check(CLI::PositiveNumber);
    app.add_option("--kv-heads", kv_heads, "key-value heads")->check(CLI::PositiveNumber);
    app.add_option("--head-dim", head_dim, "head size")->check(CLI::PositiveNumber);
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed steps of each (the median is reported)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    Rng rng(1);
    const Tensor q = random_input({1, time, heads, head_dim}, rng);
    const Tensor k = random_input({1, time, kv_heads, head_dim}, rng), v = random_input({1, time, kv_heads, head_dim}, rng);
    std::map<std::string, std::vector<double>> ms;
    for (int i = 0; i < steps + 1; ++i)
        for (const std::int64_t w : {std::int64_t{0}, window}) {
            const auto start = std::chrono::steady_clock::now();
            ops::sum(ops::causal_attention(q, k, v, {.window = w})).backward();
            const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            if (i > 0) ms[w == 0 ? "global" : "sliding"].push_back(took);  // the first is warm-up
        }
    for (auto& [kind, times] : ms) {
        std::sort(times.begin(), times.end());
        fmt::print("{}\n", nlohmann::json{{"kind", kind}, {"time", time}, {"window", kind == "global" ? 0 : window},
                                          {"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim},
                                          {"threads", threads}, {"median_step_ms", times[times.size() / 2]}}
                               .dump());
    }
    return 0;
}

// Generation with the KV cache against recomputing the prefix, on a
// Llama-shaped model (levers' decoder, random weights): for a few prompt
// lengths, the time to process the prompt and make N tokens greedily, each
// way, in one process. One JSON line per prompt length: tokens/s of each way
// and the ratio; both ways must make the same tokens.
//
//   bench_generate [--threads 2] [--new 32] [--prompts 32,128,480]
#include "levers/core/autograd.hpp"
#include "levers/core/threads.hpp"
#include "bench/llama_shape.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/llama.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

using namespace levers;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("Generation with the KV cache against recomputing the prefix", "bench_generate");
    int threads = 2, fresh = 32;
    std::vector<int> prompts = {32, 128, 480};
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--new", fresh, "tokens generated per prompt")->check(CLI::PositiveNumber);
    app.add_option("--prompts", prompts, "prompt lengths")->delimiter(',');
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    models::Llama llama(bench::llama_shape(1024), 1);
    llama.eval();
    autograd::InferenceMode inference;
    {  // warm-up: the storage pool's first blocks and the threads' start, which the first prompt would pay
        Rng rng(1);
        models::generate(llama, std::vector<std::int32_t>(8, 1), {.max_new_tokens = 2, .top_k = 1}, rng);
    }
    for (const int length : prompts) {
        std::vector<std::int32_t> prompt(static_cast<std::size_t>(length));
        for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 7919 + 13) % 32000);
        // With the cache: the prompt once, then one position per step.
        Rng rng(1);
        auto start = std::chrono::steady_clock::now();
        const auto cached = models::generate(llama, prompt, {.max_new_tokens = fresh, .top_k = 1}, rng);
        const double cached_s = seconds_since(start);
        // Recomputing: every step runs the whole sequence again.
        std::vector<std::int32_t> again = prompt;
        start = std::chrono::steady_clock::now();
        for (int n = 0; n < fresh; ++n) {
            const auto t = static_cast<std::int64_t>(again.size());
            const Tensor logits = llama.logits(Tensor::from(again, {1, t}));
            again.push_back(static_cast<std::int32_t>(ops::argmax(logits.select(1, t - 1), -1).to(DType::f64).item()));
        }
        const double recomputed_s = seconds_since(start);
        fmt::print("{}\n", nlohmann::json{{"prompt", length}, {"new_tokens", fresh}, {"threads", threads},
                                          {"cached_tokens_per_s", fresh / cached_s},
                                          {"recomputed_tokens_per_s", fresh / recomputed_s},
                                          {"speedup", recomputed_s / cached_s}, {"same_tokens", cached == again}}
                               .dump());
    }
    return 0;
}

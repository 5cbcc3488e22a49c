// Batched generation (GRPO's rollouts) against generating one sequence at a
// time, on the bench's Llama shape (levers' decoder, random weights): K
// completions of N tokens each for prompts of different lengths cut from a
// real text's token ids (--ids), each prompt --group times (GRPO's
// num_generations), both ways in one process. Greedily (temperature 0), both
// ways must make the same tokens; sampled, they draw differently. One JSON
// line: tokens per second each way, the ratio, the same tokens or not.
//
//   bench_batch_generate --ids FILE.json [--threads 2] [--completions 16] [--group 1] [--new 128] [--temperature 0]
#include "bench/llama_shape.hpp"
#include "levers/core/clock.hpp"
#include "levers/core/read_file.hpp"
#include "levers/core/threads.hpp"
#include "levers/models/batch_generate.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace levers;

int main(int argc, char** argv) {
    CLI::App app("Batched generation against one sequence at a time", "bench_batch_generate");
    std::string ids_file;
    int threads = 2, count = 16, group = 1, fresh = 128;
    double temperature = 0;
    app.add_option("--ids", ids_file, "a JSON array of token ids (a text as recipe tokenize writes it)")->required();
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--completions", count, "completions generated")->check(CLI::PositiveNumber);
    app.add_option("--group", group, "completions per prompt")->check(CLI::PositiveNumber);
    app.add_option("--temperature", temperature, "0: greedy")->check(CLI::NonNegativeNumber);
    app.add_option("--new", fresh, "tokens generated per prompt")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    const auto text = nlohmann::json::parse(read_file(ids_file)).get<std::vector<std::int32_t>>();
    // Prompt k: 32 + (k * 37) % 64 tokens of the text from position 100 k (32 to 95 tokens), `group` times.
    std::vector<std::vector<std::int32_t>> prompts;
    for (int c = 0; c < count; ++c) {
        const int k = c / group;
        const std::size_t at = static_cast<std::size_t>(k) * 100, length = 32 + static_cast<std::size_t>(k * 37 % 64);
        LEVERS_CHECK(at + length <= text.size(), "--ids: {} ids, too few for {} prompts", text.size(), count);
        prompts.emplace_back(text.begin() + static_cast<std::ptrdiff_t>(at),
                             text.begin() + static_cast<std::ptrdiff_t>(at + length));
    }
    models::Llama llama(bench::llama_shape(1024), 1);
    const models::SampleOptions greedy{.max_new_tokens = fresh, .temperature = temperature};
    Rng rng(1);
    auto start = Clock::now();
    std::vector<std::vector<std::int32_t>> alone;
    for (const auto& p : prompts) {
        const auto whole = models::generate(llama, p, greedy, rng);
        alone.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(p.size()), whole.end());
    }
    const double one_by_one = seconds_since(start);
    start = Clock::now();
    const models::BatchGeneration together = models::generate_batch(llama, prompts, greedy, rng);
    const double batched = seconds_since(start);
    std::int64_t tokens = 0;
    for (const auto& c : together.completions) tokens += static_cast<std::int64_t>(c.size());
    const double t = static_cast<double>(tokens);
    fmt::print("{}\n", nlohmann::json{{"completions", count}, {"group", group}, {"temperature", temperature},
                                      {"new_tokens", fresh}, {"threads", threads},
                                      {"tokens", tokens}, {"batched_tokens_per_s", t / batched},
                                      {"one_at_a_time_tokens_per_s", t / one_by_one},
                                      {"speedup", one_by_one / batched},
                                      {"same_tokens", together.completions == alone}}
                           .dump());
    return 0;
}

// A mixture-of-experts training step on the CPU (bench/moe_step.sh): the
// Llama shape of bench/llama_step.sh (8 layers x 512, 8 query heads over 2
// key-value heads, vocabulary 32,000) with each MLP a Mixtral block of 8
// experts of 688 (half of 1376), each token to its top 2, the load-balancing
// loss at 0.02; against the dense model of the same active parameters (MLP
// 1376), in one process, the two alternating; two sequences of 512 real
// tokens; forward, loss, backward and AdamW; the median step of each. Saves
// the mixture's weights as a Hugging Face directory (--save) so that
// PyTorch's peer (bench/moe_step.py) routes the same tokens to the same
// experts.
//
//   bench_moe_step --ids FILE.json [--threads N] [--steps N] [--save DIR]
#include "levers/core/threads.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/llama.hpp"
#include "levers/train/optimizer.hpp"
#include "bench/llama_shape.hpp"
#include "bench/lm_step.hpp"
#include "bench/timing.hpp"
#include "bench/token_batch.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace levers;

int main(int argc, char** argv) {
    CLI::App app("a mixture of experts' training step against the dense step of the same active parameters",
                 "bench_moe_step");
    std::string ids_file, save;
    int threads = 1, steps = 3;
    app.add_option("--ids", ids_file, "a JSON array of token ids (a text as recipe tokenize writes it)")->required();
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed steps of each (the median is reported)")->check(CLI::PositiveNumber);
    app.add_option("--save", save, "write the mixture's weights there as a Hugging Face directory (f32)");
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);

    const std::int64_t b = 2, t = 512;
    const auto [tokens, targets] = bench::token_batch(ids_file, b, t);
    const models::LlamaConfig dense_config = bench::llama_shape(t);
    nlohmann::json j = dense_config.to_json();
    j.update({{"model_type", "mixtral"}, {"architectures", {"MixtralForCausalLM"}}, {"intermediate_size", 688},
              {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"output_router_logits", true},
              {"router_aux_loss_coef", 0.02}});
    const models::LlamaConfig moe_config = models::parse_llama_config(j, "the benchmark's mixture");
    models::Llama moe(moe_config, 1), dense(dense_config, 1);
    if (!save.empty()) models::save_hf_model(save, moe, {.dtype = "float32"});
    train::AdamW moe_opt(moe.params(), {.lr = 1e-4}), dense_opt(dense.params(), {.lr = 1e-4});
    const auto step = [&](models::Llama& m, train::AdamW& opt) { return bench::lm_step(m, opt, tokens, targets); };
    std::vector<double> moe_ms, dense_ms;
    double moe_loss = 0, dense_loss = 0, first_loss = 0;
    for (int i = 0; i < steps + 1; ++i) {  // the first of each warms up
        const double a = bench::ms_of([&] { moe_loss = step(moe, moe_opt); });
        const double d = bench::ms_of([&] { dense_loss = step(dense, dense_opt); });
        if (i == 0) first_loss = moe_loss;  // PyTorch's from the same weights and tokens: the same, to rounding
        if (i > 0) {
            moe_ms.push_back(a);
            dense_ms.push_back(d);
        }
    }
    std::int64_t busiest = 0;
    for (const auto& layer : moe.tokens_per_expert())
        for (std::int64_t n : layer) busiest = std::max(busiest, n);
    const nlohmann::json row = {
        {"threads", threads},
        {"tokens", b * t},
        {"moe_step_ms", bench::median(moe_ms)},
        {"dense_step_ms", bench::median(dense_ms)},
        {"moe_vs_dense_time", bench::median(moe_ms) / bench::median(dense_ms)},
        {"first_loss", first_loss},
        {"moe_loss", moe_loss},
        {"dense_loss", dense_loss},
        {"moe_parameters", moe_config.parameter_count()},
        {"moe_active_parameters", moe_config.active_parameter_count()},
        {"dense_parameters", dense_config.parameter_count()},
        {"busiest_expert_tokens", busiest},
        {"even_share_tokens", b * t * 2 / 8},
    };
    fmt::print("{}\n", row.dump());
}

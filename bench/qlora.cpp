// QLoRA against LoRA on the CPU, in one process: the Llama shape of
// bench/llama_step.sh (8 layers x 512, 8 query heads over 2 key-value heads,
// MLP 1376, vocabulary 32,000) with rank-16 adapters on every projection,
// over its weights in f32 (LoRA) and in NF4 with double quantization
// (QLoRA); two sequences of 512 real tokens; forward, the loss, backward and
// AdamW on the adapters, the two alternating step by step; the median of each.
// Then what the 4-bit base holds against its bf16 size, measured on the
// model; the dequantizing kernel's output bandwidth against memcpy's for a
// 4096 x 4096 weight, and that weight as a layer (in 16 tiles) against the
// dense layer over its dequantized values, forward and backward over 512 rows.
//
//   bench_qlora --ids FILE.json [--threads N] [--steps N]
#include "levers/core/rng.hpp"
#include "levers/core/threads.hpp"
#include "levers/kernels/linear.hpp"
#include "levers/kernels/quant4.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/models/llama.hpp"
#include "levers/nn/lora.hpp"
#include "levers/nn/quantize.hpp"
#include "levers/train/optimizer.hpp"
#include "bench/llama_shape.hpp"
#include "bench/lm_step.hpp"
#include "bench/timing.hpp"
#include "bench/token_batch.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>

using namespace levers;

using bench::median;
using bench::ms_of;

int main(int argc, char** argv) {
    CLI::App app("QLoRA's step against LoRA's, its memory, and dequantizing's bandwidth", "bench_qlora");
    std::string ids_file;
    int threads = 1, steps = 5;
    app.add_option("--ids", ids_file, "a JSON array of token ids (a text as recipe tokenize writes it)")->required();
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed steps of each (the median is reported)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);

    const std::int64_t b = 2, t = 512;
    const auto [tokens, targets] = bench::token_batch(ids_file, b, t);

    const models::LlamaConfig c = bench::llama_shape(t);
    models::Llama lora(c, 1), qlora(c, 1);
    for (models::Llama* m : {&lora, &qlora}) nn::attach_lora(*m, 16, 32, 1, {"all-linear"});
    nn::hold_linears_in_4bit(qlora, {.type = Quant4Type::nf4, .double_quant = true});
    train::AdamW lora_opt(lora.params(), {.lr = 1e-4}), qlora_opt(qlora.params(), {.lr = 1e-4});
    const auto step = [&](models::Llama& m, train::AdamW& opt) { return bench::lm_step(m, opt, tokens, targets); };
    std::vector<double> lora_ms, qlora_ms;
    double lora_loss = 0, qlora_loss = 0;
    for (int i = 0; i < steps + 1; ++i) {  // the first of each warms up
        const double a = ms_of([&] { lora_loss = step(lora, lora_opt); });
        const double q = ms_of([&] { qlora_loss = step(qlora, qlora_opt); });
        if (i > 0) {
            lora_ms.push_back(a);
            qlora_ms.push_back(q);
        }
    }

    const nn::Held4Bit held = nn::held_in_4bit(qlora);
    const double bf16_bytes = 2.0 * static_cast<double>(held.values);

    // Dequantizing a 4096 x 4096 weight to f32, against memcpy of the same output bytes.
    const std::int64_t side = 4096;
    Rng rng(3);
    std::vector<float> w(static_cast<std::size_t>(side * side));
    for (float& x : w) x = static_cast<float>(rng.normal() * 0.02);
    const ops::Quantized4 q = ops::quantize_4bit(Tensor::from(w, {side, side}), {});
    const double out_bytes = static_cast<double>(w.size() * sizeof(float));
    std::vector<float> copy(w.size());
    std::vector<double> deq_ms, copy_ms;
    for (int i = 0; i < 11; ++i) {
        deq_ms.push_back(ms_of([&] { (void)ops::dequantize_4bit(q, DType::f32); }));
        copy_ms.push_back(ms_of([&] { std::memcpy(copy.data(), w.data(), static_cast<std::size_t>(out_bytes)); }));
    }
    const double deq_gbs = out_bytes / median(deq_ms) / 1e6, copy_gbs = out_bytes / median(copy_ms) / 1e6;

    // That weight as a layer over 512 rows, forward and the input's gradient: tiles of 1M values (16 of them)
    // against the dense layer over its dequantized values.
    const auto weight = std::make_shared<const ops::Quantized4>(q);
    const Tensor dense = ops::dequantize_4bit(q, DType::f32);
    std::vector<float> xs(512 * side);
    for (float& v : xs) v = static_cast<float>(rng.normal());
    const Tensor x0 = Tensor::from(xs, {512, side});
    const auto layer_ms = [&](const std::function<Tensor(const Tensor&)>& layer) {
        std::vector<double> ms;
        for (int i = 0; i < 6; ++i)
            ms.push_back(ms_of([&] {
                Tensor x = x0.clone().requires_grad_();
                ops::sum(layer(x)).backward();
            }));
        return median(ms);
    };
    const double tiled_ms = layer_ms([&](const Tensor& x) { return ops::linear_4bit(x, weight); });
    const double dense_ms = layer_ms([&](const Tensor& x) { return ops::linear(x, dense); });

    const nlohmann::json row = {
        {"threads", threads},
        {"tokens", b * t},
        {"lora_step_ms", median(lora_ms)},
        {"qlora_step_ms", median(qlora_ms)},
        {"qlora_speed_vs_lora", median(lora_ms) / median(qlora_ms)},
        {"lora_loss", lora_loss},
        {"qlora_loss", qlora_loss},
        {"base_weights", held.values},
        {"base_4bit_mb", static_cast<double>(held.bytes) / 1e6},
        {"base_bf16_mb", bf16_bytes / 1e6},
        {"base_4bit_vs_bf16", static_cast<double>(held.bytes) / bf16_bytes},
        {"bits_per_weight", 8.0 * static_cast<double>(held.bytes) / static_cast<double>(held.values)},
        {"dequantize_gb_s", deq_gbs},
        {"memcpy_gb_s", copy_gbs},
        {"dequantize_vs_memcpy", deq_gbs / copy_gbs},
        {"tiled_layer_ms", tiled_ms},
        {"dense_layer_ms", dense_ms},
        {"tiled_layer_speed_vs_dense", dense_ms / tiled_ms}};
    fmt::print("{}\n", row.dump());
    return 0;
}

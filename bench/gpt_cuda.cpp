// GPT training throughput on one NVIDIA GPU (bench/gpu_check.sh runs it):
// GPT-2 124M by default, random tokens, forward + backward + clipping + AdamW
// per step, tokens/s over the steps after a warm-up, and MFU: 6N + 6LCT FLOPs
// per token against the GPU's dense peak for the precision used (--precision
// f32 or bf16), and the milliseconds of each phase of a step (forward, backward,
// clipping, AdamW) on the GPU. Prints one JSON object.
#include "bench/gpu_peaks.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/rng.hpp"
#include "levers/core/device_memory.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/train/param_kernels.hpp"
#include "levers/models/gpt.hpp"
#include "levers/kernels/flash_attention.hpp"

#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>


int main(int argc, char** argv) {
    CLI::App app("GPT training throughput on one GPU");
    int layers = 12, heads = 12, embd = 768, block = 1024, vocab = 50257, batch = 8, steps = 10, warmup = 3;
    app.add_option("--layers", layers);
    app.add_option("--heads", heads);
    app.add_option("--embd", embd);
    app.add_option("--block", block);
    app.add_option("--vocab", vocab);
    app.add_option("--batch", batch);
    app.add_option("--steps", steps);
    app.add_option("--warmup", warmup);
    std::string precision = "bf16";
    app.add_option("--precision", precision, "f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
    CLI11_PARSE(app, argc, argv);
    if (levers::gpu_count() == 0) {
        fmt::print(stderr, "bench_gpt_cuda: no CUDA GPU is visible\n");
        return 1;
    }
    levers::use_gpu(0);
    const levers::models::GptConfig config{.vocab_size = vocab, .block_size = block, .n_layer = layers,
                                           .n_head = heads, .n_embd = embd};
    levers::models::Gpt model(config, 1);
    const levers::DType compute = precision == "bf16" ? levers::DType::bf16 : levers::DType::f32;
    model.to(levers::Device::cuda(0), compute);
    levers::Rng rng(2);
    std::vector<std::int32_t> x(static_cast<std::size_t>(batch * block)), y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
        y[i] = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
    }
    const levers::Tensor tokens = levers::Tensor::from(x, {batch, block});
    const levers::Tensor targets = levers::Tensor::from(y, {batch, block});
    const levers::kernels::AdamWHyper h{.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    levers::train::AdamW optimizer(model.params(), h);
    const auto stream = static_cast<cudaStream_t>(levers::compute_stream());
    auto synchronize = [&] { cudaStreamSynchronize(stream); };
    // Where a step's time goes on the GPU: events between its phases,
    // summed over the timed steps (a phase's idle gaps count in it).
    const char* phase_names[] = {"forward", "backward", "clip", "adamw"};
    constexpr int kPhases = 4;
    std::vector<cudaEvent_t> marks(static_cast<std::size_t>(steps) * (kPhases + 1));
    for (auto& e : marks) cudaEventCreate(&e);
    std::chrono::steady_clock::time_point start;
    double loss = 0;
    for (int step = 0; step < warmup + steps; ++step) {
        if (step == warmup) {
            synchronize();
            start = std::chrono::steady_clock::now();
        }
        cudaEvent_t* mark = step >= warmup ? &marks[static_cast<std::size_t>(step - warmup) * (kPhases + 1)] : nullptr;
        auto phase_done = [&](int i) {
            if (mark) cudaEventRecord(mark[i], stream);
        };
        // What the training loop does per step on a GPU.
        phase_done(0);
        model.params().zero_grad();
        const levers::Tensor l = model.loss(tokens, targets);
        phase_done(1);
        l.backward();
        phase_done(2);
        levers::train::clip_grad_norm(model.params(), 1.0);
        phase_done(3);
        optimizer.step(6e-4);
        phase_done(4);
        loss = l.item();  // waits for the GPU, as the training loop's progress does
    }
    synchronize();
    nlohmann::json phases;
    for (int i = 0; i < kPhases; ++i) {
        double ms = 0;
        for (int step = 0; step < steps; ++step) {
            float elapsed = 0;
            cudaEventElapsedTime(&elapsed, marks[static_cast<std::size_t>(step) * (kPhases + 1) + i],
                                 marks[static_cast<std::size_t>(step) * (kPhases + 1) + i + 1]);
            ms += elapsed;
        }
        phases[phase_names[i]] = ms / steps;
    }
    for (auto& e : marks) cudaEventDestroy(e);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_s = static_cast<double>(steps) * batch * block / seconds;
    const double n = static_cast<double>(config.parameter_count());
    const double flops_per_token = 6 * n + 6.0 * layers * embd * block;
    const std::string gpu = levers::gpu_names().front();
    const GpuPeaks peaks = gpu_peaks(gpu);
    const double peak = precision == "bf16" ? peaks.bf16_flops : peaks.f32_flops;
    nlohmann::json out = {{"GPU", gpu},           {"precision", precision}, {"parameters", n},
                          {"batch", batch},         {"block", block},         {"tokens_per_second", tokens_per_s},
                          {"ms_per_step", 1000 * seconds / steps}, {"loss", loss},
                          {"flops_per_token", flops_per_token}};
    if (peak > 0) out["mfu"] = flops_per_token * tokens_per_s / peak;
    out["ms_per_phase"] = phases;
    out["activation_gib"] = static_cast<double>(model.activation_bytes()) / (1 << 30);
    out["attention"] =
        levers::ops::flash_attention_applies(levers::Device::cuda(0), compute, embd, heads) ? "fused" : "cublas";
    fmt::print("{}\n", out.dump());
    return 0;
}

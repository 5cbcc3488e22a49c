// Each CUDA op of a GPT step alone, at GPT-2 124M's shapes by default (batch
// 8, context 1024, 768 wide, 12 heads, vocabulary 50257), in bf16: the
// median time of repeated calls (CUDA events) and what it achieves, TFLOP/s
// for the products and attention (useful FLOPs: the causal half), GB/s of
// the bytes an op must move for the memory-bound ones, each against the
// GPU's peak. Says which op keeps a step from its target before a profiler
// is needed (bench/gpu_check.sh runs it). One JSON object per line; the last
// gives the shapes and the sum of the ops' times over one step.
#include "bench/gpu_peaks.hpp"
#include "levers/core/device_memory.hpp"
#include "levers/core/dispatch.hpp"
#include "levers/core/generic_calls.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/rng.hpp"
#include "levers/kernels/adamw.hpp"
#include "levers/kernels/cuda/ops.hpp"
#include "levers/models/gpt.hpp"

#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace cu = levers::kernels::cuda;
using cu::bf16;

// `n` elements of T on the GPU, filled with uniform values in [-scale,
// scale): a random block from the host, repeated (filling gigabytes from
// the host would take longer than the measurements).
template <class T> struct Buffer {
    std::shared_ptr<std::byte> memory;
    T* get() const { return reinterpret_cast<T*>(memory.get()); }
    Buffer(std::int64_t n, float scale, std::uint64_t seed) : memory(levers::device_alloc(sizeof(T) * n)) {
        constexpr std::int64_t kBlock = 1 << 20;
        const std::int64_t first = std::min(n, kBlock);
        std::vector<T> host(static_cast<std::size_t>(first));
        levers::Rng rng(seed);
        for (auto& x : host) {
            const float v = scale * (2 * static_cast<float>(rng.uniform()) - 1);
            if constexpr (std::is_same_v<T, bf16>)
                x = __float2bfloat16_rn(v);
            else
                x = static_cast<T>(v);
        }
        cudaMemcpy(get(), host.data(), sizeof(T) * first, cudaMemcpyHostToDevice);
        for (std::int64_t at = first; at < n; at += first)
            cudaMemcpy(get() + at, get(), sizeof(T) * std::min(first, n - at), cudaMemcpyDeviceToDevice);
    }
};

// The median milliseconds of `repeats` calls, after two warm-up calls.
double median_ms(const std::function<void()>& op, int repeats, cudaStream_t stream) {
    cudaEvent_t begin, end;
    cudaEventCreate(&begin);
    cudaEventCreate(&end);
    op();
    op();
    std::vector<float> times;
    for (int i = 0; i < repeats; ++i) {
        cudaEventRecord(begin, stream);
        op();
        cudaEventRecord(end, stream);
        cudaEventSynchronize(end);
        float ms = 0;
        cudaEventElapsedTime(&ms, begin, end);
        times.push_back(ms);
    }
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app("Each CUDA op of a GPT step alone, in bf16");
    int batch = 8, block = 1024, embd = 768, heads = 12, vocab = 50257, layers = 12;
    int repeats = 20;
    app.add_option("--batch", batch);
    app.add_option("--block", block);
    app.add_option("--embd", embd);
    app.add_option("--heads", heads);
    app.add_option("--vocab", vocab);
    app.add_option("--layers", layers, "for the parameter count AdamW and clipping run over");
    app.add_option("--repeats", repeats);
    CLI11_PARSE(app, argc, argv);
    if (levers::gpu_count() == 0) {
        fmt::print(stderr, "bench_ops_cuda: no CUDA GPU is visible\n");
        return 1;
    }
    levers::use_gpu(0);
    const auto s = static_cast<cudaStream_t>(levers::compute_stream());
    const std::string gpu = levers::gpu_names().front();
    const GpuPeaks peak = gpu_peaks(gpu);
    const std::int64_t B = batch, T = block, C = embd, H = heads, V = vocab, BT = B * T, Vp = (V + 63) / 64 * 64;
    const levers::models::GptConfig config{
        .vocab_size = vocab, .block_size = block, .n_layer = layers, .n_head = heads, .n_embd = embd};
    const std::int64_t P = config.parameter_count();  // what AdamW and clipping run over

    // One layer's activations and weights, and the head's.
    Buffer<bf16> x(BT * C, 1, 1), ln(BT * C, 1, 2), qkv(BT * 3 * C, 1, 3), y(BT * C, 1, 4), fc(BT * 4 * C, 1, 5),
        fc_gelu(BT * 4 * C, 1, 6), d_x(BT * C, 1, 7), d_ln(BT * C, 1, 8), d_qkv(BT * 3 * C, 1, 9),
        d_fc(BT * 4 * C, 1, 10), logits(BT * Vp, 1, 11), w_qkv(3 * C * C, 0.02f, 12), b_qkv(3 * C, 0.02f, 13),
        w_fc(4 * C * C, 0.02f, 14), b_fc(4 * C, 0.02f, 15), d_w_fc(4 * C * C, 0, 16), d_b_fc(4 * C, 0, 17),
        wte(V * C, 0.02f, 18), d_wte(V * C, 0, 19), wpe(T * C, 0.02f, 20), d_wpe(T * C, 0, 21), ln_w(C, 1, 22),
        ln_b(C, 0.02f, 23), d_ln_w(C, 0, 24), d_ln_b(C, 0, 25), grads(P, 1e-3f, 26), w_proj(C * C, 0.02f, 37),
        b_proj(C, 0.02f, 38), d_w_proj(C * C, 0, 39), d_b_proj(C, 0, 40), w_fcp(4 * C * C, 0.02f, 41),
        b_fcp(C, 0.02f, 42), d_w_fcp(4 * C * C, 0, 43), d_b_fcp(C, 0, 44), d_w_qkv(3 * C * C, 0, 45),
        d_b_qkv(3 * C, 0, 46), weights(P, 0, 47);
    Buffer<float> mean(BT, 0, 27), rstd(BT, 1, 28), lse(BT * H, 1, 29), ce_lse(BT, 1, 30), loss(1, 0, 31),
        param(P, 0.02f, 32), m(P, 0, 33), v(P, 0, 34);
    std::vector<std::int32_t> host_tokens(static_cast<std::size_t>(BT));
    levers::Rng rng(35);
    for (auto& t : host_tokens) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(V)));
    auto tokens_memory = levers::device_alloc(sizeof(std::int32_t) * BT);
    auto* tokens = reinterpret_cast<std::int32_t*>(tokens_memory.get());
    cudaMemcpy(tokens, host_tokens.data(), sizeof(std::int32_t) * BT, cudaMemcpyHostToDevice);
    std::vector<levers::kernels::AdamWChunk> chunks;
    levers::kernels::append_adamw_chunks(chunks, 0, P, true);
    auto chunk_memory = levers::device_alloc(sizeof(levers::kernels::AdamWChunk) * chunks.size());
    auto* device_chunks = reinterpret_cast<levers::kernels::AdamWChunk*>(chunk_memory.get());
    cudaMemcpy(device_chunks, chunks.data(), sizeof(levers::kernels::AdamWChunk) * chunks.size(),
               cudaMemcpyHostToDevice);
    const levers::kernels::AdamWHyper hyper{.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    const bool fused = cu::attention_fused_supported(C, H);
    // Attention through cuBLAS keeps [B, H, T, T] probabilities (both paths
    // are timed: the GPT in bf16 takes the fused one where it applies).
    Buffer<bf16> att(B * H * T * T, 0.001f, 36);
    const double e = 2;  // bytes per bf16
    const double attention_flops = 2.0 * B * T * T * C;  // QKᵀ and PV, the causal half
    // The residual add: the generic elementwise kernel, called on this bench's stream.
    const levers::Shape rows{BT * C};
    const auto flat = [&](void* p) {
        return levers::TensorArg{p, rows, levers::Strides::contiguous(rows), levers::DType::bf16};
    };
    levers::ElementwiseCall residual_call{.out = flat(d_x.get()), .in = {flat(x.get()), flat(ln.get())}};
    residual_call.stream = s;
    const levers::KernelFn residual = levers::kernel_for(levers::kernel_slot_of<levers::ElementwiseCall>("add"),
                                                          levers::Device::cuda(0), levers::DType::bf16);

    // Each op with how often a step of the GPT (`layers` blocks, in bf16)
    // runs it, so that their sum models a step: set against bench_gpt_cuda's
    // ms_per_step, the difference is what no op accounts for (launch gaps,
    // the host's waits).
    struct Op {
        std::string name;
        double flops, bytes;  // what it must do and move (one of the two matters)
        std::function<void()> run;
        std::int64_t per_step;  // 0: timed for comparison, not on the GPT's path
        bool runs = true;       // false: not at these shapes (the fused attention needs head size 64)
    };
    const bf16* no_bias = nullptr;
    bf16* no_grad = nullptr;
    const auto n_chunks = static_cast<levers::kernels::index_t>(chunks.size());
    const std::int64_t L = layers;
    const std::vector<Op> ops = {
        {"weights to bf16 (whole model)", 0, 6.0 * P,
         [&] { cu::convert(weights.get(), param.get(), P, s); }, 1},
        {"embedding forward", 0, e * 3 * BT * C,
         [&] { cu::embedding_forward(x.get(), tokens, wte.get(), wpe.get(), B, T, C, s); }, 1},
        {"layernorm forward", 0, e * 2 * BT * C + 8.0 * BT,
         [&] { cu::layernorm_forward(ln.get(), mean.get(), rstd.get(), x.get(), ln_w.get(), ln_b.get(), BT, C, s); },
         2 * L + 1},
        {"linear qkv forward (bias epilogue)", 2.0 * BT * C * 3 * C, 0,
         [&] { cu::linear_forward(qkv.get(), ln.get(), w_qkv.get(), b_qkv.get(), BT, C, 3 * C, s); }, L},
        {"attention forward (fused)", attention_flops, 0,
         [&] { cu::attention_fused_forward(y.get(), lse.get(), qkv.get(), B, T, C, H, s); }, fused ? L : 0, fused},
        {"attention forward (cuBLAS + softmax)", attention_flops, 0,
         [&] { cu::attention_forward(y.get(), att.get(), qkv.get(), B, T, C, H, s); }, fused ? 0 : L},
        {"linear proj forward (bias epilogue)", 2.0 * BT * C * C, 0,
         [&] { cu::linear_forward(d_x.get(), y.get(), w_proj.get(), b_proj.get(), BT, C, C, s); }, L},
        {"residual (the generic add)", 0, e * 3 * BT * C, [&] { residual(residual_call); }, 4 * L},
        {"linear fc forward + GELU", 2.0 * BT * C * 4 * C, 0,
         [&] {
             cu::linear_gelu_forward(fc_gelu.get(), fc.get(), ln.get(), w_fc.get(), b_fc.get(), BT, C, 4 * C, s);
         },
         L},
        {"linear fcp forward (bias epilogue)", 2.0 * BT * 4 * C * C, 0,
         [&] { cu::linear_forward(d_x.get(), fc_gelu.get(), w_fcp.get(), b_fcp.get(), BT, 4 * C, C, s); }, L},
        {"logits forward (tied head)", 2.0 * BT * C * V, 0,
         [&] { cu::linear_forward(logits.get(), ln.get(), wte.get(), no_bias, BT, C, V, s, Vp); }, 1},
        {"cross-entropy forward", 0, e * BT * V,
         [&] { cu::cross_entropy_forward(loss.get(), ce_lse.get(), logits.get(), tokens, BT, V, s, -100, Vp); }, 1},
        {"cross-entropy backward", 0, e * 2 * BT * V,
         [&] {
             cu::cross_entropy_backward(logits.get(), ce_lse.get(), logits.get(), tokens, 1.0f, BT, V, s, -100, Vp);
         },
         1},
        {"logits backward", 4.0 * BT * C * V, 0,
         [&] {
             cu::linear_backward(d_ln.get(), d_wte.get(), no_grad, logits.get(), ln.get(), wte.get(), BT, C, V, s,
                                 Vp);
         },
         1},
        {"linear fcp backward + GELU derivative", 4.0 * BT * C * 4 * C, 0,
         [&] {
             cu::linear_gelu_backward(d_fc.get(), d_w_fcp.get(), d_b_fcp.get(), d_x.get(), fc_gelu.get(), fc.get(),
                                      w_fcp.get(), BT, 4 * C, C, s);
         },
         L},
        {"gelu backward (alone)", 0, e * 3 * BT * 4 * C,
         [&] { cu::gelu_backward(d_fc.get(), d_fc.get(), fc.get(), BT * 4 * C, s); }, 0},
        {"linear fc backward", 4.0 * BT * C * 4 * C, 0,
         [&] {
             cu::linear_backward(d_ln.get(), d_w_fc.get(), d_b_fc.get(), d_fc.get(), ln.get(), w_fc.get(), BT, C,
                                 4 * C, s);
         },
         L},
        {"layernorm backward", 0, e * 3 * BT * C + 8.0 * BT,
         [&] {
             cu::layernorm_backward(d_x.get(), d_ln_w.get(), d_ln_b.get(), d_ln.get(), x.get(), mean.get(),
                                    rstd.get(), ln_w.get(), BT, C, s);
         },
         2 * L + 1},
        {"linear proj backward", 4.0 * BT * C * C, 0,
         [&] {
             cu::linear_backward(d_ln.get(), d_w_proj.get(), d_b_proj.get(), d_x.get(), y.get(), w_proj.get(), BT, C,
                                 C, s);
         },
         L},
        {"attention backward (fused)", 2 * attention_flops, 0,
         [&] {
             cu::attention_fused_backward(d_qkv.get(), d_x.get(), y.get(), lse.get(), qkv.get(), B, T, C, H, s);
         },
         fused ? L : 0, fused},
        {"attention backward (cuBLAS + softmax)", 2 * attention_flops, 0,
         [&] { cu::attention_backward(d_qkv.get(), d_x.get(), att.get(), qkv.get(), B, T, C, H, s); },
         fused ? 0 : L},
        {"linear qkv backward", 4.0 * BT * C * 3 * C, 0,
         [&] {
             cu::linear_backward(d_ln.get(), d_w_qkv.get(), d_b_qkv.get(), d_qkv.get(), ln.get(), w_qkv.get(), BT,
                                 C, 3 * C, s);
         },
         L},
        {"embedding backward", 0, e * 3 * BT * C,
         [&] { cu::embedding_backward(d_wte.get(), d_wpe.get(), d_x.get(), tokens, B, T, C, s); }, 1},
        {"zero gradients (whole model)", 0, e * P,
         [&] { cudaMemsetAsync(grads.get(), 0, static_cast<std::size_t>(e * P), s); }, 1},
        {"clip_grad_norm (whole model)", 0, e * P, [&] { cu::clip_grad_norm(grads.get(), P, 1e30, s); }, 1},
        {"adamw (whole model, f32 master)", 0, 24.0 * P + e * P,
         [&] { cu::adamw_step(param.get(), m.get(), v.get(), grads.get(), device_chunks, n_chunks, hyper, 1, s); },
         1},
    };
    double step_ms = 0;
    for (const Op& op : ops) {
        if (!op.runs) continue;
        const double ms = median_ms(op.run, repeats, s);
        step_ms += ms * static_cast<double>(op.per_step);
        nlohmann::json line = {{"op", op.name}, {"ms", ms}, {"per_step", op.per_step}};
        if (op.flops > 0) {
            line["tflops"] = op.flops / ms / 1e9;
            if (peak.bf16_flops > 0) line["of_peak"] = op.flops / (ms * 1e-3) / peak.bf16_flops;
        } else {
            line["gb_per_s"] = op.bytes / ms / 1e6;
            if (peak.bytes_per_s > 0) line["of_peak"] = op.bytes / (ms * 1e-3) / peak.bytes_per_s;
        }
        fmt::print("{}\n", line.dump());
    }
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) {
        fmt::print(stderr, "bench_ops_cuda: {}\n", cudaGetErrorString(status));
        return 1;
    }
    const nlohmann::json shapes = {{"GPU", gpu}, {"batch", B},          {"block", T},
                                   {"embd", C},    {"heads", H},          {"vocab", V},
                                   {"layers", L},  {"ops_ms_per_step", step_ms}};
    fmt::print("{}\n", shapes.dump());
    return 0;
}

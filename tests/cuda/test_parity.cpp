// Every CUDA op against its CPU version on the same inputs: f64 to 1e-10, f32
// to 1e-5 (relative to the values' scale). Skipped, and counted as skipped,
// where no card is present.
#include "framework/core/error.hpp"
#include "framework/core/gpu.hpp"
#include "framework/core/rng.hpp"
#include "framework/train/optimizer.hpp"
#include "framework/train/param_kernels.hpp"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/embedding.hpp"
#include "kernels/grad_clip.hpp"
#include "kernels/linear.hpp"
#include "kernels/lora.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/residual.hpp"
#include "models/gpt.hpp"
#include "models/mlp.hpp"
#include "tests/cuda/device_vector.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace levers;
using levers::testing::DeviceVector;
using levers::kernels::index_t;
namespace cpu = levers::kernels::cpu;
namespace gpu = levers::kernels::cuda;

namespace {

const bool kNoGpu = gpu_count() == 0;

template <class T> std::vector<T> random(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(rng.normal() * scale);
    return v;
}

template <class T> double tolerance() { return sizeof(T) == 8 ? 1e-10 : 1e-5; }

template <class T> void check_close(const char* what, const std::vector<T>& cpu_out, const std::vector<T>& gpu_out) {
    REQUIRE(cpu_out.size() == gpu_out.size());
    double scale = 1e-3, worst = 0;
    for (std::size_t i = 0; i < cpu_out.size(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(cpu_out[i])));
        worst = std::max(worst, std::abs(static_cast<double>(cpu_out[i]) - static_cast<double>(gpu_out[i])));
    }
    INFO(what << ": worst difference " << worst << " at scale " << scale);
    CHECK(worst <= tolerance<T>() * scale);
}

}  // namespace

TEST_CASE_TEMPLATE("CUDA element-wise ops match the CPU: GELU, residual, AdamW over chunks" * doctest::skip(kNoGpu), T, float,
                   double) {
    const std::size_t n = 10007;  // not a multiple of a block
    auto x = random<T>(n, 1), g = random<T>(n, 2);
    std::vector<T> out(n), d(n);
    cpu::gelu_forward(out.data(), x.data(), static_cast<index_t>(n));
    cpu::gelu_backward(d.data(), g.data(), x.data(), static_cast<index_t>(n));
    DeviceVector<T> dx(x), dg(g), dout(n), dd(n);
    gpu::gelu_forward(dout.get(), dx.get(), static_cast<index_t>(n), nullptr);
    gpu::gelu_backward(dd.get(), dg.get(), dx.get(), static_cast<index_t>(n), nullptr);
    check_close("gelu forward", out, dout.host());
    check_close("gelu backward", d, dd.host());

    cpu::residual_forward(out.data(), x.data(), g.data(), static_cast<index_t>(n));
    gpu::residual_forward(dout.get(), dx.get(), dg.get(), static_cast<index_t>(n), nullptr);
    check_close("residual", out, dout.host());

    // AdamW over two tensors in one launch: the first decays, the second (a bias) does not.
    auto p = random<T>(n, 3), m = random<T>(n, 4, 0.1), v = random<T>(n, 5, 0.1);
    for (auto& e : v) e = e * e;  // second moments are non-negative
    DeviceVector<T> dp(p), dm(m), dv(v);
    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    const index_t split = 9000;  // more than two chunks before it
    std::vector<kernels::AdamWChunk> chunks;
    kernels::append_adamw_chunks(chunks, 0, split, true);
    kernels::append_adamw_chunks(chunks, split, static_cast<index_t>(n) - split, false);
    kernels::AdamWHyper no_decay = h;
    no_decay.weight_decay = 0;
    cpu::adamw_step(p.data(), m.data(), v.data(), g.data(), split, h, 7);
    cpu::adamw_step(p.data() + split, m.data() + split, v.data() + split, g.data() + split,
                    static_cast<index_t>(n) - split, no_decay, 7);
    DeviceVector<kernels::AdamWChunk> dchunks(chunks);
    gpu::adamw_step(dp.get(), dm.get(), dv.get(), dg.get(), dchunks.get(), static_cast<index_t>(chunks.size()), h, 7,
                    nullptr);
    check_close("adamw parameters", p, dp.host());
    check_close("adamw first moments", m, dm.host());
    check_close("adamw second moments", v, dv.host());
}

TEST_CASE_TEMPLATE("CUDA layernorm matches the CPU, forward and backward" * doctest::skip(kNoGpu), T, float, double) {
    const index_t rows = 37, c = 100;  // not a multiple of a warp
    auto x = random<T>(rows * c, 6), w = random<T>(c, 7), b = random<T>(c, 8), dy = random<T>(rows * c, 9);
    std::vector<T> out(rows * c), mean(rows), rstd(rows), dx(rows * c), dw(c, T(1)), db(c, T(2));
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, c);
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(), w.data(),
                            rows, c);
    DeviceVector<T> gx(x), gw(w), gb(b), gdy(dy), gout(rows * c), gmean(rows), grstd(rows), gdx(rows * c),
        gdw(std::vector<T>(c, T(1))), gdb(std::vector<T>(c, T(2)));
    gpu::layernorm_forward(gout.get(), gmean.get(), grstd.get(), gx.get(), gw.get(), gb.get(), rows, c, nullptr);
    gpu::layernorm_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gmean.get(), grstd.get(), gw.get(),
                            rows, c, nullptr);
    check_close("layernorm out", out, gout.host());
    check_close("layernorm rstd", rstd, grstd.host());
    check_close("layernorm d_x", dx, gdx.host());
    check_close("layernorm d_weight (added)", dw, gdw.host());
    check_close("layernorm d_bias (added)", db, gdb.host());
}

TEST_CASE_TEMPLATE("CUDA cross-entropy matches the CPU, with ignored rows" * doctest::skip(kNoGpu), T, float, double) {
    const index_t rows = 29, vocab = 2500;  // more than a block of threads
    auto logits = random<T>(rows * vocab, 10, 3.0);
    std::vector<std::int32_t> targets(rows);
    for (index_t r = 0; r < rows; ++r) targets[r] = r % 5 == 0 ? -100 : static_cast<std::int32_t>((r * 37) % vocab);
    std::vector<T> lse(rows), d(rows * vocab);
    const T loss = cpu::cross_entropy_forward(lse.data(), logits.data(), targets.data(), rows, vocab);
    cpu::cross_entropy_backward(d.data(), lse.data(), logits.data(), targets.data(), T(1), rows, vocab);
    DeviceVector<T> glogits(logits), glse(rows), gloss(1), gd(rows * vocab);
    DeviceVector<std::int32_t> gtargets(targets);
    gpu::cross_entropy_forward(gloss.get(), glse.get(), glogits.get(), gtargets.get(), rows, vocab, nullptr);
    gpu::cross_entropy_backward(gd.get(), glse.get(), glogits.get(), gtargets.get(), T(1), rows, vocab, nullptr);
    check_close("cross-entropy loss", std::vector<T>{loss}, gloss.host());
    check_close("cross-entropy lse", lse, glse.host());
    check_close("cross-entropy d_logits", d, gd.host());
}

TEST_CASE_TEMPLATE("CUDA linear (cuBLAS) matches the CPU, forward and backward" * doctest::skip(kNoGpu), T, float,
                   double) {
    const index_t n = 33, in = 48, out = 80;
    auto x = random<T>(n * in, 11), w = random<T>(out * in, 12), b = random<T>(out, 13), dy = random<T>(n * out, 14);
    std::vector<T> y(n * out), dx(n * in), dw(out * in, T(0.5)), db(out, T(0.25));
    cpu::linear_forward(y.data(), x.data(), w.data(), b.data(), n, in, out);
    cpu::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), n, in, out);
    DeviceVector<T> gx(x), gw(w), gb(b), gdy(dy), gy(n * out), gdx(n * in), gdw(std::vector<T>(out * in, T(0.5))),
        gdb(std::vector<T>(out, T(0.25)));
    gpu::linear_forward(gy.get(), gx.get(), gw.get(), gb.get(), n, in, out, nullptr);
    gpu::linear_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), n, in, out, nullptr);
    check_close("linear out", y, gy.host());
    check_close("linear d_in", dx, gdx.host());
    check_close("linear d_weight (added)", dw, gdw.host());
    check_close("linear d_bias (added)", db, gdb.host());

    // The MLP's layer with GELU fused (a cuBLASLt epilogue where it applies).
    std::vector<T> act(n * out);
    cpu::gelu_forward(act.data(), y.data(), n * out);
    DeviceVector<T> gpre(n * out), gact(n * out);
    gpu::linear_gelu_forward(gact.get(), gpre.get(), gx.get(), gw.get(), gb.get(), n, in, out, nullptr);
    check_close("linear+GELU pre-activation", y, gpre.host());
    check_close("linear+GELU output", act, gact.host());
}

TEST_CASE_TEMPLATE("CUDA attention matches the CPU, forward and backward" * doctest::skip(kNoGpu), T, float, double) {
    const index_t batch = 2, time = 19, channels = 24, heads = 3;
    auto qkv = random<T>(batch * time * 3 * channels, 15), dy = random<T>(batch * time * channels, 16);
    std::vector<T> y(batch * time * channels), att(batch * heads * time * time), dqkv(qkv.size());
    cpu::attention_forward(y.data(), att.data(), qkv.data(), batch, time, channels, heads);
    cpu::attention_backward(dqkv.data(), dy.data(), att.data(), qkv.data(), batch, time, channels, heads);
    DeviceVector<T> gqkv(qkv), gdy(dy), gy(y.size()), gatt(att.size()), gdqkv(qkv.size());
    gpu::attention_forward(gy.get(), gatt.get(), gqkv.get(), batch, time, channels, heads, nullptr);
    gpu::attention_backward(gdqkv.get(), gdy.get(), gatt.get(), gqkv.get(), batch, time, channels, heads, nullptr);
    check_close("attention y", y, gy.host());
    check_close("attention probabilities", att, gatt.host());
    check_close("attention d_qkv", dqkv, gdqkv.host());
}

TEST_CASE_TEMPLATE("CUDA embedding and gradient clipping match the CPU" * doctest::skip(kNoGpu), T, float, double) {
    const index_t batch = 3, time = 7, channels = 16, vocab = 50;
    std::vector<std::int32_t> tokens(batch * time);
    for (index_t i = 0; i < batch * time; ++i) tokens[i] = static_cast<std::int32_t>((i * 13) % vocab);
    tokens[5] = tokens[9] = tokens[20] = tokens[2];  // a repeated token: its gradient rows add up
    auto wte = random<T>(vocab * channels, 17), wpe = random<T>(time * channels, 18);
    auto dy = random<T>(batch * time * channels, 19);
    std::vector<T> out(batch * time * channels), dwte(vocab * channels), dwpe(time * channels);
    cpu::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), batch, time, channels, vocab);
    cpu::embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), batch, time, channels);
    DeviceVector<std::int32_t> gtok(tokens);
    DeviceVector<T> gwte(wte), gwpe(wpe), gdy(dy), gout(out.size()), gdwte(dwte.size()), gdwpe(dwpe.size());
    gpu::embedding_forward(gout.get(), gtok.get(), gwte.get(), gwpe.get(), batch, time, channels, nullptr);
    gpu::embedding_backward(gdwte.get(), gdwpe.get(), gdy.get(), gtok.get(), batch, time, channels, nullptr);
    check_close("embedding out", out, gout.host());
    check_close("embedding d_wte", dwte, gdwte.host());
    check_close("embedding d_wpe", dwpe, gdwpe.host());

    const index_t many = 300007;  // more than the clipping grid covers in one sweep
    auto g = random<T>(many, 20);
    DeviceVector<T> gg(g);
    const double norm = cpu::clip_grad_norm(g.data(), many, 1.0);
    const double gnorm = gpu::clip_grad_norm(gg.get(), many, 1.0, nullptr);
    CHECK(gnorm == doctest::Approx(norm).epsilon(tolerance<T>()));
    check_close("clipped gradients", g, gg.host());
}

TEST_CASE_TEMPLATE("CUDA LoRA matches the CPU, forward and backward" * doctest::skip(kNoGpu), T, float, double) {
    const index_t n = 21, in = 32, out = 40, r = 4;
    const T scale = T(2);
    auto x = random<T>(n * in, 21), a = random<T>(r * in, 22), b = random<T>(out * r, 23), dy = random<T>(n * out, 24);
    auto y = random<T>(n * out, 25), dx = random<T>(n * in, 26);  // out and d_in are added to
    std::vector<T> u(n * r), du(n * r), da(r * in, T(0.5)), db(out * r, T(0.5));
    DeviceVector<T> gx(x), ga(a), gb(b), gdy(dy), gy(y), gdx(dx), gu(n * r), gdu(n * r),
        gda(std::vector<T>(r * in, T(0.5))), gdb(std::vector<T>(out * r, T(0.5)));
    cpu::lora_forward(y.data(), u.data(), x.data(), a.data(), b.data(), n, in, out, r, scale);
    cpu::lora_backward(dx.data(), da.data(), db.data(), du.data(), dy.data(), x.data(), u.data(), a.data(), b.data(),
                       n, in, out, r, scale);
    gpu::lora_forward(gy.get(), gu.get(), gx.get(), ga.get(), gb.get(), n, in, out, r, scale, nullptr);
    gpu::lora_backward(gdx.get(), gda.get(), gdb.get(), gdu.get(), gdy.get(), gx.get(), gu.get(), ga.get(), gb.get(),
                       n, in, out, r, scale, nullptr);
    check_close("lora out (added)", y, gy.host());
    check_close("lora u", u, gu.host());
    check_close("lora d_in (added)", dx, gdx.host());
    check_close("lora d_a (added)", da, gda.host());
    check_close("lora d_b (added)", db, gdb.host());
}

TEST_CASE("the whole GPT on the card matches the CPU: loss, every gradient, clipping and one AdamW step" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    models::GptConfig config{.vocab_size = 97, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32};
    models::Gpt<float> cpu_model(config, 31), gpu_model(config, 31);  // the same seed: the same weights
    gpu_model.to_device(Device::cuda(0));
    REQUIRE(gpu_model.device() == Device::cuda(0));
    std::vector<std::int32_t> tokens(3 * 16), targets(3 * 16);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % 97);
        targets[i] = static_cast<std::int32_t>((i * 11 + 5) % 97);
    }
    targets[4] = -100;  // an ignored position
    const float cpu_loss = cpu_model.forward(tokens.data(), targets.data(), 3, 16);
    const float gpu_loss = gpu_model.forward(tokens.data(), targets.data(), 3, 16);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-5));
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    cpu_model.backward();
    gpu_model.backward();
    auto host = [](const Tensor& t) {
        const Tensor h = t.to(Device::cpu());
        return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
    };
    check_close("GPT gradients", host(cpu_model.params().grads()), host(gpu_model.params().grads()));
    CHECK(train::clip_grad_norm(gpu_model.params(), 0.5) ==
          doctest::Approx(train::clip_grad_norm(cpu_model.params(), 0.5)).epsilon(1e-5));

    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    train::AdamW<float> cpu_opt(cpu_model.params(), h), gpu_opt(gpu_model.params(), h);
    cpu_opt.step(1e-3);
    gpu_opt.step(1e-3);
    check_close("GPT parameters after a step", host(cpu_model.params().params()), host(gpu_model.params().params()));
    check_close("AdamW second moments", host(cpu_opt.second_moment()), host(gpu_opt.second_moment()));

    // Sampling reads the logits on the host.
    cpu_model.forward(tokens.data(), nullptr, 1, 16);
    gpu_model.forward(tokens.data(), nullptr, 1, 16);
    check_close("GPT logits without targets", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 16 * 97),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 16 * 97));
}

TEST_CASE("a GPT with LoRA adapters on the card matches the CPU: adapter gradients, frozen base, merge" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    models::GptConfig config{.vocab_size = 61, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
    models::Gpt<float> cpu_model(config, 5), gpu_model(config, 5);
    for (auto* m : {&cpu_model, &gpu_model}) m->enable_lora(4, 8.0, 9);
    gpu_model.to_device(Device::cuda(0));
    auto host = [](const Tensor& t) {
        const Tensor h = t.to(Device::cpu());
        return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
    };
    // Non-zero B, so the adapters change the function.
    const auto b = random<float>(static_cast<std::size_t>(cpu_model.lora_params().size()), 17, 0.1);
    std::copy(b.begin(), b.end(), cpu_model.lora_params().params().data<float>());
    Tensor gpu_adapters = gpu_model.lora_params().params();  // a handle on the card's buffer
    gpu_adapters.copy_from(cpu_model.lora_params().params());
    std::vector<std::int32_t> tokens(2 * 8), targets(2 * 8);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((i * 5 + 1) % 61);
        targets[i] = static_cast<std::int32_t>((i * 3 + 2) % 61);
    }
    CHECK(gpu_model.forward(tokens.data(), targets.data(), 2, 8) ==
          doctest::Approx(cpu_model.forward(tokens.data(), targets.data(), 2, 8)).epsilon(1e-5));
    cpu_model.backward();
    gpu_model.backward();
    check_close("LoRA gradients", host(cpu_model.lora_params().grads()), host(gpu_model.lora_params().grads()));
    const auto base = host(gpu_model.params().grads());
    CHECK(std::all_of(base.begin(), base.end(), [](float g) { return g == 0; }));  // the base stays frozen
    cpu_model.merge_lora();
    gpu_model.merge_lora();
    check_close("merged weights", host(cpu_model.params().params()), host(gpu_model.params().params()));
}

TEST_CASE("the MLP classifier on the card matches the CPU: loss, gradients and logits" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::MlpConfig config{.inputs = 20, .hidden = {16, 8}, .classes = 5};
    models::Mlp<float> cpu_model(config, 7), gpu_model(config, 7);
    gpu_model.to_device(Device::cuda(0));
    const auto x = random<float>(6 * 20, 41);
    const std::vector<std::int32_t> y = {0, 4, 2, 1, 3, 2};
    const float cpu_loss = cpu_model.forward(x.data(), y.data(), 6);
    CHECK(gpu_model.forward(x.data(), y.data(), 6) == doctest::Approx(cpu_loss).epsilon(1e-5));
    check_close("MLP logits", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 30),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 30));
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    cpu_model.backward();
    gpu_model.backward();
    const Tensor g = gpu_model.params().grads().to(Device::cpu());
    const float* c = cpu_model.params().grads().data<float>();
    check_close("MLP gradients", std::vector<float>(c, c + cpu_model.params().size()),
                std::vector<float>(g.data<float>(), g.data<float>() + g.numel()));
}

TEST_CASE("without a card, levers says so instead of crashing") {
    if (!kNoGpu) return;  // this machine has one: nothing to check here
    CHECK(gpu_count() == 0);
    CHECK(gpu_names().empty());
    CHECK_THROWS_WITH_AS(use_gpu(0), doctest::Contains("card 0 asked for, but this process sees 0 cards"), Error);
    CHECK_THROWS_AS(Tensor::zeros({4}, DType::f32, Device::cuda(0)), Error);  // cudaMalloc named, no crash
}

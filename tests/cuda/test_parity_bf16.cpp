// The CUDA ops in bf16 against the CPU's f32 on the same (bf16-representable)
// inputs: bf16 keeps about 3 significant digits, so each output must agree to
// 3% of the values' scale; sums run in f32 on the card, which is what keeps
// long reductions (layernorm, attention, the vocabulary) that close. Then the
// whole GPT in bf16 against the CPU in f32. Skipped where no card is present.
#include "framework/core/gpu.hpp"
#include "framework/core/rng.hpp"
#include "framework/train/optimizer.hpp"
#include "framework/train/param_kernels.hpp"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "kernels/residual.hpp"
#include "models/gpt.hpp"
#include "models/mlp.hpp"
#include "tests/cuda/device_vector.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>

using namespace levers;
using levers::kernels::index_t;
using levers::testing::DeviceVector;
namespace cpu = levers::kernels::cpu;
namespace gpu = levers::kernels::cuda;

namespace {

const bool kNoGpu = gpu_count() == 0;
constexpr double kTolerance = 3e-2;

// bf16 is the high half of an f32, rounded to nearest even.
std::uint16_t bf16_bits(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}
float from_bits(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

// Random values already rounded to bf16, so both sides start from the same numbers.
std::vector<float> random(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = from_bits(bf16_bits(static_cast<float>(rng.normal() * scale)));
    return v;
}

// A bf16 copy on the card of f32 host values.
class Bf16Vector {
public:
    explicit Bf16Vector(const std::vector<float>& host) : bits_(to_bits(host)) {}
    explicit Bf16Vector(std::size_t n) : bits_(n) {}
    gpu::bf16* get() const { return reinterpret_cast<gpu::bf16*>(bits_.get()); }
    std::vector<float> host() const {
        std::vector<float> out;
        for (std::uint16_t b : bits_.host()) out.push_back(from_bits(b));
        return out;
    }

private:
    static std::vector<std::uint16_t> to_bits(const std::vector<float>& v) {
        std::vector<std::uint16_t> out;
        for (float x : v) out.push_back(bf16_bits(x));
        return out;
    }
    DeviceVector<std::uint16_t> bits_;
};

void check_close(const char* what, const std::vector<float>& want, const std::vector<float>& got,
                 double tolerance = kTolerance) {
    REQUIRE(want.size() == got.size());
    double scale = 1e-3, worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(want[i])));
        worst = std::max(worst, std::abs(static_cast<double>(want[i]) - static_cast<double>(got[i])));
    }
    INFO(what << ": worst difference " << worst << " at scale " << scale);
    CHECK(worst <= tolerance * scale);
}

// ‖got − want‖ / ‖want‖: for whole gradients, where single small entries may
// differ by more than their own size but the direction must hold.
double relative_error(const std::vector<float>& want, const std::vector<float>& got) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        norm += double(want[i]) * want[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-30));
}

// Zeroes both models' gradients, runs backward on each (after a forward with
// targets), and returns the CPU's f32 gradients and the card's bf16 ones as f32.
template <class Model>
std::pair<std::vector<float>, std::vector<float>> both_gradients(Model& cpu_model, Model& gpu_model) {
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    cpu_model.backward();
    gpu_model.backward();
    const float* c = cpu_model.params().grads().template data<float>();
    const Tensor bits = gpu_model.params().grads().to(Device::cpu());
    const auto* raw = static_cast<const std::uint16_t*>(bits.raw());
    std::vector<float> card;
    for (std::int64_t i = 0; i < bits.numel(); ++i) card.push_back(from_bits(raw[i]));
    return {std::vector<float>(c, c + cpu_model.params().size()), card};
}

}  // namespace

TEST_CASE("bf16 CUDA element-wise ops and layernorm match the CPU's f32" * doctest::skip(kNoGpu)) {
    const index_t rows = 37, c = 100, n = rows * c;
    auto x = random(n, 1), y = random(n, 2), w = random(c, 3), b = random(c, 4), dy = random(n, 5);
    std::vector<float> gelu(n), dgelu(n), sum(n);
    cpu::gelu_forward(gelu.data(), x.data(), n);
    cpu::gelu_backward(dgelu.data(), dy.data(), x.data(), n);
    cpu::residual_forward(sum.data(), x.data(), y.data(), n);
    Bf16Vector gx(x), gy(y), gdy(dy), gout(n), gd(n), gsum(n);
    gpu::gelu_forward(gout.get(), gx.get(), n, nullptr);
    gpu::gelu_backward(gd.get(), gdy.get(), gx.get(), n, nullptr);
    gpu::residual_forward(gsum.get(), gx.get(), gy.get(), n, nullptr);
    check_close("gelu forward", gelu, gout.host());
    check_close("gelu backward", dgelu, gd.host());
    check_close("residual", sum, gsum.host());

    std::vector<float> out(n), mean(rows), rstd(rows), dx(n), dw(c, 1.0f), db(c, 2.0f);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, c);
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(), w.data(),
                            rows, c);
    Bf16Vector gw(w), gb(b), gln(n), gdx(n), gdw(std::vector<float>(c, 1.0f)), gdb(std::vector<float>(c, 2.0f));
    DeviceVector<float> gmean(rows), grstd(rows);
    gpu::layernorm_forward(gln.get(), gmean.get(), grstd.get(), gx.get(), gw.get(), gb.get(), rows, c, nullptr);
    gpu::layernorm_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gmean.get(), grstd.get(), gw.get(),
                            rows, c, nullptr);
    check_close("layernorm out", out, gln.host());
    check_close("layernorm rstd (f32)", rstd, grstd.host(), 1e-4);
    check_close("layernorm d_x", dx, gdx.host());
    check_close("layernorm d_weight (added)", dw, gdw.host());
    check_close("layernorm d_bias (added)", db, gdb.host());
}

TEST_CASE("bf16 CUDA cross-entropy matches the CPU's f32, with ignored rows" * doctest::skip(kNoGpu)) {
    const index_t rows = 29, vocab = 2500;
    auto logits = random(rows * vocab, 10, 3.0);
    std::vector<std::int32_t> targets(rows);
    for (index_t r = 0; r < rows; ++r) targets[r] = r % 5 == 0 ? -100 : static_cast<std::int32_t>((r * 37) % vocab);
    std::vector<float> lse(rows), d(rows * vocab);
    const float loss = cpu::cross_entropy_forward(lse.data(), logits.data(), targets.data(), rows, vocab);
    cpu::cross_entropy_backward(d.data(), lse.data(), logits.data(), targets.data(), 1.0f, rows, vocab);
    Bf16Vector glogits(logits), gd(rows * vocab);
    DeviceVector<float> glse(rows), gloss(1);
    DeviceVector<std::int32_t> gtargets(targets);
    gpu::cross_entropy_forward(gloss.get(), glse.get(), glogits.get(), gtargets.get(), rows, vocab, nullptr);
    gpu::cross_entropy_backward(gd.get(), glse.get(), glogits.get(), gtargets.get(), 1.0f, rows, vocab, nullptr);
    // The logits are the same bf16 numbers on both sides and every sum is f32: tight.
    CHECK(gloss.host()[0] == doctest::Approx(loss).epsilon(1e-5));
    check_close("cross-entropy lse (f32)", lse, glse.host(), 1e-5);
    check_close("cross-entropy d_logits", d, gd.host());
}

TEST_CASE("bf16 CUDA linear, attention and embedding match the CPU's f32" * doctest::skip(kNoGpu)) {
    const index_t n = 64, in = 48, out = 80;
    auto x = random(n * in, 11), w = random(out * in, 12, 0.2), b = random(out, 13), dy = random(n * out, 14);
    std::vector<float> y(n * out), act(n * out), dx(n * in), dw(out * in, 0.5f), db(out, 0.25f);
    cpu::linear_forward(y.data(), x.data(), w.data(), b.data(), n, in, out);
    cpu::gelu_forward(act.data(), y.data(), n * out);
    cpu::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), n, in, out);
    Bf16Vector gx(x), gw(w), gb(b), gdy(dy), gy(n * out), gpre(n * out), gact(n * out), gdx(n * in),
        gdw(std::vector<float>(out * in, 0.5f)), gdb(std::vector<float>(out, 0.25f));
    gpu::linear_forward(gy.get(), gx.get(), gw.get(), gb.get(), n, in, out, nullptr);
    gpu::linear_gelu_forward(gact.get(), gpre.get(), gx.get(), gw.get(), gb.get(), n, in, out, nullptr);
    gpu::linear_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), n, in, out, nullptr);
    check_close("linear out", y, gy.host());
    check_close("linear+GELU pre-activation", y, gpre.host());
    check_close("linear+GELU output", act, gact.host());
    check_close("linear d_in", dx, gdx.host());
    check_close("linear d_weight (added)", dw, gdw.host());
    check_close("linear d_bias (added)", db, gdb.host());

    const index_t batch = 2, time = 19, channels = 24, heads = 3;
    auto qkv = random(batch * time * 3 * channels, 15), dya = random(batch * time * channels, 16);
    std::vector<float> ya(batch * time * channels), att(batch * heads * time * time), dqkv(qkv.size());
    cpu::attention_forward(ya.data(), att.data(), qkv.data(), batch, time, channels, heads);
    cpu::attention_backward(dqkv.data(), dya.data(), att.data(), qkv.data(), batch, time, channels, heads);
    Bf16Vector gqkv(qkv), gdya(dya), gya(ya.size()), gatt(att.size()), gdqkv(qkv.size());
    gpu::attention_forward(gya.get(), gatt.get(), gqkv.get(), batch, time, channels, heads, nullptr);
    gpu::attention_backward(gdqkv.get(), gdya.get(), gatt.get(), gqkv.get(), batch, time, channels, heads, nullptr);
    check_close("attention y", ya, gya.host());
    check_close("attention probabilities", att, gatt.host());
    check_close("attention d_qkv", dqkv, gdqkv.host());

    const index_t eb = 3, et = 7, ec = 16, vocab = 50;
    std::vector<std::int32_t> tokens(eb * et);
    for (index_t i = 0; i < eb * et; ++i) tokens[i] = static_cast<std::int32_t>((i * 13) % vocab);
    tokens[5] = tokens[9] = tokens[20] = tokens[2];  // one token's gradient gathers four rows, in f32
    auto wte = random(vocab * ec, 17), wpe = random(et * ec, 18), dye = random(eb * et * ec, 19);
    std::vector<float> emb(eb * et * ec), dwte(vocab * ec), dwpe(et * ec);
    cpu::embedding_forward(emb.data(), tokens.data(), wte.data(), wpe.data(), eb, et, ec, vocab);
    cpu::embedding_backward(dwte.data(), dwpe.data(), dye.data(), tokens.data(), eb, et, ec);
    DeviceVector<std::int32_t> gtok(tokens);
    Bf16Vector gwte(wte), gwpe(wpe), gdye(dye), gemb(emb.size()), gdwte(dwte.size()), gdwpe(dwpe.size());
    gpu::embedding_forward(gemb.get(), gtok.get(), gwte.get(), gwpe.get(), eb, et, ec, nullptr);
    gpu::embedding_backward(gdwte.get(), gdwpe.get(), gdye.get(), gtok.get(), eb, et, ec, nullptr);
    check_close("embedding out", emb, gemb.host());
    check_close("embedding d_wte", dwte, gdwte.host());
    check_close("embedding d_wpe", dwpe, gdwpe.host());
}

TEST_CASE("bf16 fused (flash-style) attention matches the CPU's f32 attention, forward and backward" *
          doctest::skip(kNoGpu)) {
    struct Shape {
        index_t batch, time;
    };
    // Tiles are 64 rows: one partial tile, one and a half tiles, a single position.
    for (const Shape shape : {Shape{2, 17}, Shape{2, 100}, Shape{3, 1}}) {
        const index_t batch = shape.batch, time = shape.time, channels = 128, heads = 2, d = 64;
        CAPTURE(time);
        REQUIRE(gpu::attention_fused_supported(channels, heads));
        auto qkv = random(batch * time * 3 * channels, 40, 0.5), dy = random(batch * time * channels, 41);
        std::vector<float> y(batch * time * channels), att(batch * heads * time * time), dqkv(qkv.size());
        cpu::attention_forward(y.data(), att.data(), qkv.data(), batch, time, channels, heads);
        cpu::attention_backward(dqkv.data(), dy.data(), att.data(), qkv.data(), batch, time, channels, heads);
        // Each query row's log-sum-exp of its scaled causal scores, in double.
        std::vector<float> lse(batch * heads * time);
        for (index_t b = 0; b < batch; ++b)
            for (index_t h = 0; h < heads; ++h)
                for (index_t t = 0; t < time; ++t) {
                    std::vector<double> scores;
                    for (index_t k = 0; k <= t; ++k) {
                        double dot = 0;
                        for (index_t c = 0; c < d; ++c)
                            dot += double(qkv[(b * time + t) * 3 * channels + h * d + c]) *
                                   qkv[(b * time + k) * 3 * channels + channels + h * d + c];
                        scores.push_back(dot / std::sqrt(double(d)));
                    }
                    const double m = *std::max_element(scores.begin(), scores.end());
                    double sum = 0;
                    for (double x : scores) sum += std::exp(x - m);
                    lse[(b * heads + h) * time + t] = static_cast<float>(m + std::log(sum));
                }
        Bf16Vector gqkv(qkv), gdy(dy), gy(y.size()), gdqkv(qkv.size());
        DeviceVector<float> glse(lse.size());
        gpu::attention_fused_forward(gy.get(), glse.get(), gqkv.get(), batch, time, channels, heads, nullptr);
        gpu::attention_fused_backward(gdqkv.get(), gdy.get(), gy.get(), glse.get(), gqkv.get(), batch, time, channels,
                                      heads, nullptr);
        check_close("fused attention y", y, gy.host());
        check_close("fused attention log-sum-exp (f32)", lse, glse.host(), 1e-3);
        check_close("fused attention d_qkv", dqkv, gdqkv.host());
    }
}

TEST_CASE("AdamW steps f32 master weights from bf16 gradients" * doctest::skip(kNoGpu)) {
    const std::size_t n = 10007;
    auto p = random(n, 30), g = random(n, 31), m = random(n, 32, 0.1), v = random(n, 33, 0.1);
    for (auto& e : v) e = e * e;
    std::vector<kernels::AdamWChunk> chunks;
    kernels::append_adamw_chunks(chunks, 0, static_cast<index_t>(n), true);
    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    DeviceVector<float> dp(p), dm(m), dv(v);
    Bf16Vector dg(g);
    DeviceVector<kernels::AdamWChunk> dchunks(chunks);
    cpu::adamw_step(p.data(), m.data(), v.data(), g.data(), static_cast<index_t>(n), h, 3);
    gpu::adamw_step(dp.get(), dm.get(), dv.get(), dg.get(), dchunks.get(), static_cast<index_t>(chunks.size()), h, 3,
                    nullptr);
    // The gradients are the same bf16 numbers on both sides; the update is f32 throughout.
    check_close("master weights", p, dp.host(), 1e-5);
    check_close("second moments", v, dv.host(), 1e-5);
}

namespace {
// One forward, backward and AdamW step of a GPT in bf16 on the card against
// the same GPT in f32 on the CPU.
void check_gpt_in_bf16(const models::GptConfig& config) {
    models::Gpt<float> cpu_model(config, 31), gpu_model(config, 31);
    gpu_model.to_device(Device::cuda(0), DType::bf16);
    CHECK(gpu_model.params().params().dtype() == DType::f32);  // the master weights
    CHECK(gpu_model.params().grad_dtype() == DType::bf16);
    std::vector<std::int32_t> tokens(3 * 16), targets(3 * 16);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % 97);
        targets[i] = static_cast<std::int32_t>((i * 11 + 5) % 97);
    }
    const float cpu_loss = cpu_model.forward(tokens.data(), targets.data(), 3, 16);
    const float gpu_loss = gpu_model.forward(tokens.data(), targets.data(), 3, 16);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(2e-2));
    const auto [c, gpu_grads] = both_gradients(cpu_model, gpu_model);
    for (const auto& e : cpu_model.params().entries()) {
        const std::vector<float> want(c.begin() + e.offset, c.begin() + e.offset + e.shape.numel());
        const std::vector<float> got(gpu_grads.begin() + e.offset, gpu_grads.begin() + e.offset + e.shape.numel());
        INFO(e.name);
        CHECK(relative_error(want, got) < 5e-2);
    }
    const double cpu_norm = train::clip_grad_norm(cpu_model.params(), 1e9);
    CHECK(train::clip_grad_norm(gpu_model.params(), 1e9) == doctest::Approx(cpu_norm).epsilon(3e-2));

    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    train::AdamW<float> cpu_opt(cpu_model.params(), h), gpu_opt(gpu_model.params(), h);
    cpu_opt.step(1e-3);
    gpu_opt.step(1e-3);
    const Tensor after = gpu_model.params().params().to(Device::cpu());
    const float* want = cpu_model.params().params().data<float>();
    double worst = 0;
    for (std::int64_t i = 0; i < after.numel(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(after.data<float>()[i] - want[i])));
    CHECK(worst <= 2.5e-3);  // Adam's first step moves each weight by about lr·sign(g)

    // Sampling reads f32 logits on the host from the bf16 model.
    cpu_model.forward(tokens.data(), nullptr, 1, 16);
    gpu_model.forward(tokens.data(), nullptr, 1, 16);
    check_close("GPT logits without targets", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 16 * 97),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 16 * 97), 5e-2);
}
}  // namespace

TEST_CASE("the whole GPT in bf16 on the card follows the CPU's f32: loss, gradients, one AdamW step" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    SUBCASE("head size 8: attention through cuBLAS") {
        check_gpt_in_bf16({.vocab_size = 97, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32});
    }
    SUBCASE("head size 64: the fused attention kernel") {
        check_gpt_in_bf16({.vocab_size = 97, .block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 128});
    }
}

TEST_CASE("the MLP classifier in bf16 on the card follows the CPU's f32: loss, logits, gradients" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::MlpConfig config{.inputs = 20, .hidden = {16, 8}, .classes = 5};
    models::Mlp<float> cpu_model(config, 7), gpu_model(config, 7);
    gpu_model.to_device(Device::cuda(0), DType::bf16);
    CHECK(gpu_model.params().grad_dtype() == DType::bf16);
    const auto x = random(6 * 20, 41);
    const std::vector<std::int32_t> y = {0, 4, 2, 1, 3, 2};
    const float cpu_loss = cpu_model.forward(x.data(), y.data(), 6);
    CHECK(gpu_model.forward(x.data(), y.data(), 6) == doctest::Approx(cpu_loss).epsilon(2e-2));
    check_close("MLP logits", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 30),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 30), 5e-2);
    const auto [want, got] = both_gradients(cpu_model, gpu_model);
    CHECK(relative_error(want, got) < 5e-2);
}

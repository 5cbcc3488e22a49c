// Every CUDA op against its CPU version, in every storage type the GPU
// computes in: f64 to 1e-10, f32 to 1e-5, bf16 to 3% (statistics kept in
// f32 to 1e-5), relative to the values' scale (tests/gpu/gpu_values.hpp).
// Shapes are not multiples of a warp, a block or a tile. Skipped, and counted
// as skipped, where no GPU is present.
#include "levers/core/device_memory.hpp"
#include "levers/core/dispatch.hpp"
#include "levers/core/error.hpp"
#include "levers/core/generic_calls.hpp"
#include "levers/core/gpu.hpp"
#include "levers/kernels/adamw.hpp"
#include "levers/kernels/attention.hpp"
#include "levers/kernels/cross_entropy.hpp"
#include "levers/kernels/cuda/ops.hpp"
#include "levers/kernels/embedding.hpp"
#include "levers/kernels/gelu.hpp"
#include "levers/kernels/grad_clip.hpp"
#include "levers/kernels/layernorm.hpp"
#include "levers/kernels/linear.hpp"
#include "levers/kernels/lora.hpp"
#include "tests/gpu/no_gpu.hpp"
#include "tests/gpu/gpu_values.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

using namespace levers;
using namespace levers::testing;
using levers::kernels::index_t;
namespace cpu = levers::kernels::cpu;
namespace gpu = levers::kernels::cuda;


#define LEVERS_EVERY_PRECISION float, double, gpu::bf16

// out = a + b on the GPU through the generic elementwise "add" kernel (the residual add).
template <class S> void gpu_add(S* out, const S* a, const S* b, index_t n) {
    const DType dtype = std::is_same_v<S, float> ? DType::f32 : std::is_same_v<S, double> ? DType::f64 : DType::bf16;
    const Shape shape{n};
    const auto arg = [&](const void* p) { return TensorArg{const_cast<void*>(p), shape, Strides::contiguous(shape), dtype}; };
    ElementwiseCall call{.out = arg(out), .in = {arg(a), arg(b)}};
    run_kernel(kernel_slot_of<ElementwiseCall>("add"), Device::cuda(0), dtype, call);
}

TEST_CASE_TEMPLATE("CUDA GELU and the residual add match the CPU" * doctest::skip(kNoGpu), S, LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    use_gpu(0);
    const index_t n = 10007;  // not a multiple of a block
    auto x = random<S>(n, 1), y = random<S>(n, 2), g = random<S>(n, 3);
    std::vector<H> out(n), d(n), sum(n);
    cpu::gelu_forward(out.data(), x.data(), n);
    cpu::gelu_backward(d.data(), g.data(), x.data(), n);
    for (index_t i = 0; i < n; ++i) sum[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(i)] + y[static_cast<std::size_t>(i)];
    Gpu<S> cx(x), cy(y), cg(g), cout(n), cd(n), csum(n);
    gpu::gelu_forward(cout.get(), cx.get(), n, nullptr);
    gpu::gelu_backward(cd.get(), cg.get(), cx.get(), n, nullptr);
    gpu_add(csum.get(), cx.get(), cy.get(), n);
    device_synchronize();
    check_close("gelu forward", out, cout.host(), Precision<S>::values);
    check_close("gelu backward", d, cd.host(), Precision<S>::values);
    check_close("residual", sum, csum.host(), Precision<S>::values);
    // Arrays one element off 16-byte alignment take the one-at-a-time path.
    Gpu<S> cd1(n), csum1(n);
    gpu::gelu_backward(cd1.get() + 1, cg.get() + 1, cx.get() + 1, n - 1, nullptr);
    gpu_add(csum1.get() + 1, cx.get() + 1, cy.get() + 1, n - 1);
    device_synchronize();
    const auto tail = [](const std::vector<H>& v) { return std::vector<H>(v.begin() + 1, v.end()); };
    check_close("gelu backward, unaligned", tail(d), tail(cd1.host()), Precision<S>::values);
    check_close("residual, unaligned", tail(sum), tail(csum1.host()), Precision<S>::values);
}

TEST_CASE("CUDA conversions and scaling: f32 to bf16 rounded to nearest even, back exactly, x *= s" *
          doctest::skip(kNoGpu)) {
    const index_t n = 1001;  // packs of 4 and a partial one
    const auto x = random<float>(n, 60);
    std::vector<float> want_bf16, want_scaled;
    for (float f : x) {
        want_bf16.push_back(bf16_to_float(bf16_bits(f)));
        want_scaled.push_back(f * 0.25f);
    }
    for (const index_t offset : {index_t{0}, index_t{1}}) {  // aligned, then one element off (one at a time)
        CAPTURE(offset);
        DeviceVector<float> cx(x), cback(n);
        Gpu<gpu::bf16> chalf(n);
        gpu::convert(chalf.get() + offset, cx.get() + offset, n - offset, nullptr);
        gpu::convert(cback.get() + offset, chalf.get() + offset, n - offset, nullptr);
        gpu::scale(cx.get() + offset, 0.25f, n - offset, nullptr);
        const auto half = chalf.host(), back = cback.host(), scaled = cx.host();
        for (index_t i = offset; i < n; ++i) {
            REQUIRE(half[i] == want_bf16[i]);
            REQUIRE(back[i] == want_bf16[i]);
            REQUIRE(scaled[i] == want_scaled[i]);
        }
    }
}

TEST_CASE_TEMPLATE("CUDA AdamW over a chunk table matches the CPU's per-tensor steps" * doctest::skip(kNoGpu), S,
                   LEVERS_EVERY_PRECISION) {
    // Parameters and moments in P (f32 master weights under bf16), gradients in S.
    using P = host_t<S>;
    // The first tensor decays, the second (a bias) does not; its chunks start
    // off a multiple of 4, so they take the one-at-a-time path.
    const index_t n = 10007, split = 9001;
    auto p = random<P>(n, 3), m = random<P>(n, 4, 0.1), v = random<P>(n, 5, 0.1);
    for (auto& e : v) e = e * e;  // second moments are non-negative
    auto g = random<S>(n, 6);
    std::vector<kernels::AdamWChunk> chunks;
    kernels::append_adamw_chunks(chunks, 0, split, true);
    kernels::append_adamw_chunks(chunks, split, n - split, false);
    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    DeviceVector<P> cp(p), cm(m), cv(v);
    Gpu<S> cg(g);
    DeviceVector<kernels::AdamWChunk> cchunks(chunks);
    kernels::AdamWHyper no_decay = h;
    no_decay.weight_decay = 0;
    cpu::adamw_step(p.data(), m.data(), v.data(), g.data(), split, h, 7);
    cpu::adamw_step(p.data() + split, m.data() + split, v.data() + split, g.data() + split, n - split, no_decay, 7);
    gpu::adamw_step(cp.get(), cm.get(), cv.get(), cg.get(), cchunks.get(), static_cast<index_t>(chunks.size()), h, 7,
                    nullptr);
    // The same gradient values on both sides and the update in P throughout: the sums' tolerance.
    check_close("adamw parameters", p, cp.host(), Precision<S>::sums);
    check_close("adamw first moments", m, cm.host(), Precision<S>::sums);
    check_close("adamw second moments", v, cv.host(), Precision<S>::sums);
}

TEST_CASE_TEMPLATE("CUDA layernorm matches the CPU, forward and backward" * doctest::skip(kNoGpu), S,
                   LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    using A = gpu::acc_t<S>;
    // 700 rows: 44 blocks of partial weight and bias sums, more than the
    // finish kernel's 8 parts. 101 channels: one at a time; 104: packs of 16
    // bytes in every precision; 800: over 48 KiB of shared sums (f32 sums:
    // the opt-in size) or over 96 KiB (f64 sums: the column-sum passes).
    const index_t rows = 700;
    for (const index_t c : {index_t{101}, index_t{104}, index_t{800}}) {
        CAPTURE(c);
        auto x = random<S>(rows * c, 6), w = random<S>(c, 7), b = random<S>(c, 8), dy = random<S>(rows * c, 9);
        std::vector<H> out(rows * c), mean(rows), rstd(rows), dx(rows * c), dw(c, H(1)), db(c, H(2));
        cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, c);
        cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(),
                                w.data(), rows, c);
        Gpu<S> cx(x), cw(w), cb(b), cdy(dy), cout(rows * c), cdx(rows * c), cdw(std::vector<H>(c, H(1))),
            cdb(std::vector<H>(c, H(2)));
        DeviceVector<A> cmean(rows), crstd(rows);
        gpu::layernorm_forward(cout.get(), cmean.get(), crstd.get(), cx.get(), cw.get(), cb.get(), rows, c, nullptr);
        gpu::layernorm_backward(cdx.get(), cdw.get(), cdb.get(), cdy.get(), cx.get(), cmean.get(), crstd.get(),
                                cw.get(), rows, c, nullptr);
        check_close("layernorm out", out, cout.host(), Precision<S>::values);
        check_close("layernorm rstd", rstd, crstd.host(), Precision<S>::sums * 10);
        check_close("layernorm d_x", dx, cdx.host(), Precision<S>::values);
        check_close("layernorm d_weight (added)", dw, cdw.host(), Precision<S>::values);
        check_close("layernorm d_bias (added)", db, cdb.host(), Precision<S>::values);
    }
}

TEST_CASE_TEMPLATE("CUDA cross-entropy matches the CPU, with ignored rows" * doctest::skip(kNoGpu), S,
                   LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    using A = gpu::acc_t<S>;
    const index_t rows = 29;
    // Rows of 128 threads (300, 301: at most 8 logits a thread) and of 1024 (9004, 9005: more than a block of
    // threads per row); rows 16-byte aligned in f32 and f64 (packs) but not in bf16 at 300 and 9004, in none at
    // 301 and 9005 (one logit at a time).
    for (const index_t vocab : {index_t{300}, index_t{301}, index_t{9004}, index_t{9005}}) {
        CAPTURE(vocab);
        auto logits = random<S>(rows * vocab, 10, 3.0);
        std::vector<std::int32_t> targets(rows);
        for (index_t r = 0; r < rows; ++r) targets[r] = r % 5 == 0 ? -100 : static_cast<std::int32_t>((r * 37) % vocab);
        std::vector<H> lse(rows), d(rows * vocab);
        const H loss = cpu::cross_entropy_forward(lse.data(), logits.data(), targets.data(), rows, vocab);
        cpu::cross_entropy_backward(d.data(), lse.data(), logits.data(), targets.data(), H(1), rows, vocab);
        Gpu<S> clogits(logits), cd(rows * vocab);
        DeviceVector<A> clse(rows), closs(1);
        DeviceVector<std::int32_t> ctargets(targets);
        gpu::cross_entropy_forward(closs.get(), clse.get(), clogits.get(), ctargets.get(), rows, vocab, nullptr);
        gpu::cross_entropy_backward(cd.get(), clse.get(), clogits.get(), ctargets.get(), A(1), rows, vocab, nullptr);
        check_close("cross-entropy loss", std::vector<H>{loss}, closs.host(), Precision<S>::sums);
        check_close("cross-entropy lse", lse, clse.host(), Precision<S>::sums);
        check_close("cross-entropy d_logits", d, cd.host(), Precision<S>::values);
    }
}

TEST_CASE_TEMPLATE("CUDA linear (cuBLAS, cuBLASLt epilogues) matches the CPU, forward and backward" *
                       doctest::skip(kNoGpu),
                   S, LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    const index_t n = 33, in = 48, out = 80;
    auto x = random<S>(n * in, 11), w = random<S>(out * in, 12, 0.2), b = random<S>(out, 13);
    auto dy = random<S>(n * out, 14);
    std::vector<H> y(n * out), act(n * out), dx(n * in), dw(out * in, H(0.5)), db(out, H(0.25));
    cpu::linear_forward(y.data(), x.data(), w.data(), b.data(), n, in, out);
    cpu::gelu_forward(act.data(), y.data(), n * out);
    cpu::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), n, in, out);
    Gpu<S> cx(x), cw(w), cb(b), cdy(dy), cy(n * out), cpre(n * out), cact(n * out), cdx(n * in),
        cdw(std::vector<H>(out * in, H(0.5))), cdb(std::vector<H>(out, H(0.25)));
    gpu::linear_forward(cy.get(), cx.get(), cw.get(), cb.get(), n, in, out, nullptr);
    gpu::linear_gelu_forward(cact.get(), cpre.get(), cx.get(), cw.get(), cb.get(), n, in, out, nullptr);
    gpu::linear_backward(cdx.get(), cdw.get(), cdb.get(), cdy.get(), cx.get(), cw.get(), n, in, out, nullptr);
    check_close("linear out", y, cy.host(), Precision<S>::values);
    check_close("linear+GELU pre-activation", y, cpre.host(), Precision<S>::values);
    check_close("linear+GELU output", act, cact.host(), Precision<S>::values);
    check_close("linear d_in", dx, cdx.host(), Precision<S>::values);
    check_close("linear d_weight (added)", dw, cdw.host(), Precision<S>::values);
    check_close("linear d_bias (added)", db, cdb.host(), Precision<S>::values);

    // A layer fed by GELU: the gradient at GELU's input (in bf16 through the
    // product's epilogue), with the weight and bias gradients.
    std::vector<H> gx(n * in), d_gx(n * in), d_pre(n * in), dw2(out * in, H(0)), db2(out, H(0));
    cpu::gelu_forward(gx.data(), x.data(), n * in);
    for (auto& v : gx) v = rounded<S>(v);  // what the GPU holds
    cpu::linear_backward(d_gx.data(), dw2.data(), db2.data(), dy.data(), gx.data(), w.data(), n, in, out);
    cpu::gelu_backward(d_pre.data(), d_gx.data(), x.data(), n * in);
    Gpu<S> cgx(gx), cd_pre(n * in), cdw2(out * in), cdb2(out);
    gpu::linear_gelu_backward(cd_pre.get(), cdw2.get(), cdb2.get(), cdy.get(), cgx.get(), cx.get(), cw.get(), n, in,
                              out, nullptr);
    check_close("linear+GELU backward d_pre", d_pre, cd_pre.host(), Precision<S>::values);
    check_close("linear+GELU backward d_weight", dw2, cdw2.host(), Precision<S>::values);
    check_close("linear+GELU backward d_bias", db2, cdb2.host(), Precision<S>::values);
}

TEST_CASE_TEMPLATE("CUDA linear and cross-entropy on rows padded apart (the GPT's logits) match the CPU" *
                       doctest::skip(kNoGpu),
                   S, LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    using A = gpu::acc_t<S>;
    const index_t n = 9, in = 16, vocab = 97, ld = 128;  // rows 128 apart, 97 used
    auto x = random<S>(n * in, 50), w = random<S>(vocab * in, 51, 0.5);
    std::vector<std::int32_t> targets(n);
    for (index_t r = 0; r < n; ++r) targets[r] = static_cast<std::int32_t>((r * 11) % vocab);
    std::vector<H> logits(n * vocab), lse(n), dx(n * in), dw(vocab * in, H(0));
    cpu::linear_forward(logits.data(), x.data(), w.data(), static_cast<const H*>(nullptr), n, in, vocab);
    const H loss = cpu::cross_entropy_forward(lse.data(), logits.data(), targets.data(), n, vocab);
    std::vector<H> d = logits;
    cpu::cross_entropy_backward(d.data(), lse.data(), logits.data(), targets.data(), H(1), n, vocab);
    cpu::linear_backward(dx.data(), dw.data(), static_cast<H*>(nullptr), d.data(), x.data(), w.data(), n, in, vocab);
    Gpu<S> cx(x), cw(w), clogits(n * ld), cdx(n * in), cdw(std::vector<H>(vocab * in, H(0)));
    DeviceVector<A> clse(n), closs(1);
    DeviceVector<std::int32_t> ctargets(targets);
    gpu::linear_forward(clogits.get(), cx.get(), cw.get(), static_cast<const S*>(nullptr), n, in, vocab, nullptr, ld);
    const auto padded = clogits.host();
    std::vector<H> gpu_logits;
    for (index_t r = 0; r < n; ++r)
        gpu_logits.insert(gpu_logits.end(), padded.begin() + r * ld, padded.begin() + r * ld + vocab);
    check_close("padded logits", logits, gpu_logits, Precision<S>::values);
    gpu::cross_entropy_forward(closs.get(), clse.get(), clogits.get(), ctargets.get(), n, vocab, nullptr, -100, ld);
    check_close("padded cross-entropy lse", lse, clse.host(), Precision<S>::values);
    check_close("padded cross-entropy loss", std::vector<H>{loss}, closs.host(), Precision<S>::values);
    gpu::cross_entropy_backward(clogits.get(), clse.get(), clogits.get(), ctargets.get(), A(1), n, vocab, nullptr,
                                -100, ld);
    gpu::linear_backward(cdx.get(), cdw.get(), static_cast<S*>(nullptr), clogits.get(), cx.get(), cw.get(), n, in,
                         vocab, nullptr, ld);
    check_close("padded d_in", dx, cdx.host(), Precision<S>::values);
    check_close("padded d_weight", dw, cdw.host(), Precision<S>::values);
    // A bias needs contiguous rows: refused, not miscomputed.
    Gpu<S> cb(random<S>(vocab, 52));
    CHECK_THROWS_AS(gpu::linear_forward(clogits.get(), cx.get(), cw.get(), cb.get(), n, in, vocab, nullptr, ld),
                    Error);
}

TEST_CASE_TEMPLATE("CUDA attention (batched GEMMs) matches the CPU, forward and backward" * doctest::skip(kNoGpu), S,
                   LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    const index_t batch = 2, time = 19, channels = 24, heads = 3;
    auto qkv = random<S>(batch * time * 3 * channels, 15), dy = random<S>(batch * time * channels, 16);
    std::vector<H> y(batch * time * channels), att(batch * heads * time * time), dqkv(qkv.size());
    cpu::attention_forward(y.data(), att.data(), qkv.data(), batch, time, channels, heads);
    cpu::attention_backward(dqkv.data(), dy.data(), att.data(), qkv.data(), batch, time, channels, heads);
    Gpu<S> cqkv(qkv), cdy(dy), cy(y.size()), catt(att.size()), cdqkv(qkv.size());
    gpu::attention_forward(cy.get(), catt.get(), cqkv.get(), batch, time, channels, heads, nullptr);
    gpu::attention_backward(cdqkv.get(), cdy.get(), catt.get(), cqkv.get(), batch, time, channels, heads, nullptr);
    check_close("attention y", y, cy.host(), Precision<S>::values);
    check_close("attention probabilities", att, catt.host(), Precision<S>::values);
    check_close("attention d_qkv", dqkv, cdqkv.host(), Precision<S>::values);
}

TEST_CASE("CUDA fused (flash-style) attention in bf16 matches the CPU's f32 attention, forward and backward" *
          doctest::skip(kNoGpu)) {
    struct Shape {
        index_t batch, time;
    };
    // Tiles are 64 rows: one partial tile, one and a half tiles, a single
    // position, and four tiles (three partly masked key tiles per last query tile).
    for (const Shape shape : {Shape{2, 17}, Shape{2, 100}, Shape{3, 1}, Shape{1, 200}}) {
        const index_t batch = shape.batch, time = shape.time, channels = 128, heads = 2, d = 64;
        CAPTURE(time);
        REQUIRE(gpu::attention_fused_supported(channels, heads));
        auto qkv = random<gpu::bf16>(batch * time * 3 * channels, 40, 0.5);
        auto dy = random<gpu::bf16>(batch * time * channels, 41);
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
        Gpu<gpu::bf16> cqkv(qkv), cdy(dy), cy(y.size()), cdqkv(qkv.size());
        DeviceVector<float> clse(lse.size());
        gpu::attention_fused_forward(cy.get(), clse.get(), cqkv.get(), batch, time, channels, heads, nullptr);
        gpu::attention_fused_backward(cdqkv.get(), cdy.get(), cy.get(), clse.get(), cqkv.get(), batch, time, channels,
                                      heads, nullptr);
        check_close("fused attention y", y, cy.host(), Precision<gpu::bf16>::values);
        check_close("fused attention log-sum-exp", lse, clse.host(), 1e-3);
        check_close("fused attention d_qkv", dqkv, cdqkv.host(), Precision<gpu::bf16>::values);
    }
}

// Refused by name before any CUDA call, so this runs without a GPU too.
TEST_CASE("CUDA fused attention refuses a head size other than 64 or 128 and misaligned arrays") {
    auto* aligned = reinterpret_cast<gpu::bf16*>(std::uintptr_t{1} << 20);  // never dereferenced
    auto* lse = reinterpret_cast<float*>(std::uintptr_t{1} << 21);
    CHECK_FALSE(gpu::attention_fused_supported(96, 2));
    CHECK_THROWS_WITH_AS(gpu::attention_fused_forward(aligned, lse, aligned, 1, 8, 96, 2, nullptr),
                         doctest::Contains("head size (channels / heads) of 64 or 128"), Error);
    CHECK_THROWS_WITH_AS(gpu::attention_fused_forward(aligned, lse, aligned + 1, 1, 8, 128, 2, nullptr),
                         doctest::Contains("qkv and d_y 16-byte aligned"), Error);
    CHECK_THROWS_WITH_AS(
        gpu::attention_fused_backward(aligned, aligned + 4, aligned, lse, aligned, 1, 8, 128, 2, nullptr),
        doctest::Contains("qkv and d_y 16-byte aligned"), Error);
}

TEST_CASE_TEMPLATE("CUDA embedding matches the CPU, a repeated token's rows summed" * doctest::skip(kNoGpu), S,
                   LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    const index_t batch = 3, time = 7, channels = 16, vocab = 50;
    std::vector<std::int32_t> tokens(batch * time);
    for (index_t i = 0; i < batch * time; ++i) tokens[i] = static_cast<std::int32_t>((i * 13) % vocab);
    tokens[5] = tokens[9] = tokens[20] = tokens[2];  // one token's gradient gathers four rows
    auto wte = random<S>(vocab * channels, 17), wpe = random<S>(time * channels, 18);
    auto dy = random<S>(batch * time * channels, 19);
    std::vector<H> out(batch * time * channels), dwte(vocab * channels), dwpe(time * channels);
    cpu::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), batch, time, channels, vocab);
    cpu::embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), batch, time, channels);
    DeviceVector<std::int32_t> ctok(tokens);
    Gpu<S> cwte(wte), cwpe(wpe), cdy(dy), cout(out.size()), cdwte(dwte.size()), cdwpe(dwpe.size());
    gpu::embedding_forward(cout.get(), ctok.get(), cwte.get(), cwpe.get(), batch, time, channels, nullptr);
    gpu::embedding_backward(cdwte.get(), cdwpe.get(), cdy.get(), ctok.get(), batch, time, channels, nullptr);
    check_close("embedding out", out, cout.host(), Precision<S>::values);
    check_close("embedding d_wte", dwte, cdwte.host(), Precision<S>::values);
    check_close("embedding d_wpe", dwpe, cdwpe.host(), Precision<S>::values);
}

TEST_CASE_TEMPLATE("CUDA gradient clipping matches the CPU" * doctest::skip(kNoGpu), S, LEVERS_EVERY_PRECISION) {
    for (const index_t n : {index_t{300007}, index_t{1001}}) {  // more than the largest grid covers in one sweep; a small grid
        CAPTURE(n);
        auto g = random<S>(n, 20);
        Gpu<S> cg(g);
        const double norm = cpu::clip_grad_norm(g.data(), n, 1.0);
        const double gpu_norm = gpu::clip_grad_norm(cg.get(), n, 1.0, nullptr);
        CHECK(gpu_norm == doctest::Approx(norm).epsilon(Precision<S>::sums * 10));  // the same values, summed in double
        check_close("clipped gradients", g, cg.host(), Precision<S>::values);
    }
}

TEST_CASE_TEMPLATE("CUDA LoRA matches the CPU, forward and backward" * doctest::skip(kNoGpu), S,
                   LEVERS_EVERY_PRECISION) {
    using H = host_t<S>;
    const index_t n = 21, in = 32, out = 40, r = 4;
    const H scale = H(2);
    auto x = random<S>(n * in, 21), a = random<S>(r * in, 22), b = random<S>(out * r, 23);
    auto dy = random<S>(n * out, 24), y = random<S>(n * out, 25), dx = random<S>(n * in, 26);  // y, dx added to
    std::vector<H> u(n * r), du(n * r), da(r * in, H(0.5)), db(out * r, H(0.5));
    Gpu<S> cx(x), ca(a), cb(b), cdy(dy), cy(y), cdx(dx), cu(n * r), cdu(n * r), cda(std::vector<H>(r * in, H(0.5))),
        cdb(std::vector<H>(out * r, H(0.5)));
    cpu::lora_forward(y.data(), u.data(), x.data(), a.data(), b.data(), n, in, out, r, scale);
    cpu::lora_backward(dx.data(), da.data(), db.data(), du.data(), dy.data(), x.data(), u.data(), a.data(), b.data(),
                       n, in, out, r, scale);
    gpu::lora_forward(cy.get(), cu.get(), cx.get(), ca.get(), cb.get(), n, in, out, r, scale, nullptr);
    gpu::lora_backward(cdx.get(), cda.get(), cdb.get(), cdu.get(), cdy.get(), cx.get(), cu.get(), ca.get(), cb.get(), n,
                       in, out, r, scale, nullptr);
    check_close("lora out (added)", y, cy.host(), Precision<S>::values);
    check_close("lora u", u, cu.host(), Precision<S>::values);
    check_close("lora d_in (added)", dx, cdx.host(), Precision<S>::values);
    check_close("lora d_a (added)", da, cda.host(), Precision<S>::values);
    check_close("lora d_b (added)", db, cdb.host(), Precision<S>::values);
}

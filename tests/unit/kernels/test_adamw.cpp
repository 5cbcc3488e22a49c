#include "levers/core/error.hpp"
#include "levers/core/threads.hpp"
#include "levers/kernels/adamw.hpp"
#include "levers/kernels/grad_clip.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace k = levers::kernels::cpu;
namespace kernels = levers::kernels;
using levers::Error;
using levers::kernels::AdamWHyper;

TEST_CASE("AdamW's first step moves each weight by lr against the gradient's sign") {
    // With bias correction, m̂/√v̂ = g/|g| on step 1, whatever |g| is.
    std::vector<double> p = {1.0, -2.0, 0.5}, m(3, 0.0), v(3, 0.0), g = {0.3, -40.0, 1e-3};
    AdamWHyper h{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-12, .weight_decay = 0.0};
    k::adamw_step(p.data(), m.data(), v.data(), g.data(), 3, h, 1);
    CHECK(p[0] == doctest::Approx(0.99));
    CHECK(p[1] == doctest::Approx(-1.99));
    CHECK(p[2] == doctest::Approx(0.49));
}

TEST_CASE("AdamW's weight decay is decoupled: with a zero gradient it only shrinks the weight") {
    std::vector<double> p = {2.0}, m = {0.0}, v = {0.0}, g = {0.0};
    AdamWHyper h{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.5};
    k::adamw_step(p.data(), m.data(), v.data(), g.data(), 1, h, 1);
    CHECK(p[0] == doctest::Approx(2.0 * (1 - 0.1 * 0.5)));
}

TEST_CASE("AdamW's second step follows the moment estimates") {
    std::vector<double> p = {0.0}, m = {0.0}, v = {0.0};
    AdamWHyper h{.lr = 1.0, .beta1 = 0.5, .beta2 = 0.75, .eps = 0.0, .weight_decay = 0.0};
    std::vector<double> g1 = {2.0}, g2 = {1.0};
    k::adamw_step(p.data(), m.data(), v.data(), g1.data(), 1, h, 1);  // p = -1
    k::adamw_step(p.data(), m.data(), v.data(), g2.data(), 1, h, 2);
    // step 1: m = 1, v = 1. step 2: m = 0.5·1 + 0.5·1 = 1, v = 0.75·1 + 0.25·1 = 1,
    // m̂ = 1/(1-0.25), v̂ = 1/(1-0.5625).
    CHECK(m[0] == doctest::Approx(1.0));
    CHECK(v[0] == doctest::Approx(1.0));
    CHECK(p[0] == doctest::Approx(-1.0 - (1.0 / 0.75) / std::sqrt(1.0 / 0.4375)));
}

TEST_CASE("AdamW rejects step 0") {
    std::vector<float> p(1), m(1), v(1), g(1);
    CHECK_THROWS_AS(k::adamw_step(p.data(), m.data(), v.data(), g.data(), 1, AdamWHyper{}, 0), levers::Error);
}

TEST_CASE("global gradient-norm clipping") {
    std::vector<float> g = {3, 4};
    CHECK(k::grad_norm(g.data(), 2) == doctest::Approx(5.0));
    CHECK(k::clip_grad_norm(g.data(), 2, 10.0) == doctest::Approx(5.0));  // under the limit: untouched
    CHECK(g == std::vector<float>{3, 4});
    CHECK(k::clip_grad_norm(g.data(), 2, 1.0) == doctest::Approx(5.0));
    CHECK(g[0] == doctest::Approx(0.6));
    CHECK(g[1] == doctest::Approx(0.8));
    CHECK(k::grad_norm(g.data(), 2) == doctest::Approx(1.0));
}

TEST_CASE("AdamW and clipping over many elements on two threads equal one thread's, every block and the tail") {
    // 3 x 2^16 + 5 elements: past the one-thread limit (2^16), blocks of 2^14 and a short last one.
    const std::int64_t n = 3 * (std::int64_t{1} << 16) + 5;
    std::vector<float> grad(static_cast<std::size_t>(n)), start(grad.size());
    for (std::size_t i = 0; i < grad.size(); ++i) {
        grad[i] = std::sin(0.001f * static_cast<float>(i)) * 1e-2f;
        start[i] = std::cos(0.002f * static_cast<float>(i));
    }
    const AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    const int before = levers::threads();
    struct Result {
        double norm;
        std::vector<float> clipped, p;
    };
    const auto run = [&](int threads) {
        levers::set_threads(threads);
        Result r{0, grad, start};
        r.norm = k::clip_grad_norm(r.clipped.data(), n, 1.0);
        std::vector<float> m(grad.size()), v(grad.size());
        for (long step = 1; step <= 2; ++step) k::adamw_step(r.p.data(), m.data(), v.data(), grad.data(), n, h, step);
        return r;
    };
    const Result one = run(1), two = run(2);
    levers::set_threads(before);
    CHECK(two.norm == doctest::Approx(one.norm).epsilon(1e-12));  // the blocks' sums added in another order
    CHECK(one.norm > 1.0);                                         // so every element was scaled
    for (const std::size_t i : {std::size_t{0}, grad.size() / 2, grad.size() - 1}) {
        CHECK(one.clipped[i] == doctest::Approx(grad[i] / one.norm).epsilon(1e-5));
        CHECK(two.clipped[i] == doctest::Approx(one.clipped[i]).epsilon(1e-6));
    }
    CHECK(one.p == two.p);  // elementwise: the same on any number of threads
    CHECK(one.p.back() != start.back());
}

TEST_CASE("AdamW chunks for the one-launch GPU update cover every element once, never crossing a tensor") {
    // A GPT-like layout: a big matrix, a bias, a tensor of exactly one chunk, an empty one, a small one.
    const std::vector<std::pair<std::int64_t, bool>> tensors = {
        {3 * kernels::kAdamWChunk + 17, true}, {768, false}, {kernels::kAdamWChunk, true}, {0, true}, {5, false}};
    std::vector<kernels::AdamWChunk> chunks;
    std::int64_t start = 0;
    for (const auto& [n, decay] : tensors) {
        kernels::append_adamw_chunks(chunks, start, n, decay);
        start += n;
    }
    CHECK(chunks.size() == 4 + 1 + 1 + 0 + 1);
    std::int64_t next = 0;
    std::size_t k = 0;
    start = 0;
    for (const auto& [n, decay] : tensors) {
        for (std::int64_t done = 0; done < n; ++k) {
            REQUIRE(k < chunks.size());
            CHECK(chunks[k].start == next);  // contiguous: nothing skipped, nothing twice
            CHECK(chunks[k].count >= 1);
            CHECK(chunks[k].count <= kernels::kAdamWChunk);
            CHECK(chunks[k].decay == (decay ? 1 : 0));
            CHECK(chunks[k].start + chunks[k].count <= start + n);  // inside its tensor
            next += chunks[k].count;
            done += chunks[k].count;
        }
        start += n;
    }
    CHECK(k == chunks.size());
    CHECK(next == start);
    CHECK_THROWS_AS(kernels::append_adamw_chunks(chunks, -1, 4, true), Error);
}

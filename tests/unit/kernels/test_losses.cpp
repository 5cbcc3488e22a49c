// Losses against their definitions written out in double (PyTorch's
// formulas and reductions), and against the fused cross-entropy.
#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;

namespace {
std::vector<double> normals(std::size_t n, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<double> v(n);
    for (double& x : v) x = rng.normal();
    return v;
}
}  // namespace

TEST_CASE("regression losses: mse, l1, smooth l1, each reduction") {
    const std::vector<double> a = normals(6, 1), b = normals(6, 2);
    const Tensor x = Tensor::from(a, {2, 3}), y = Tensor::from(b, {2, 3});
    double mse = 0, l1 = 0, huber = 0;
    for (std::size_t i = 0; i < 6; ++i) {
        const double d = a[i] - b[i];
        mse += d * d / 6;
        l1 += std::abs(d);
        huber += std::abs(d) < 0.5 ? 0.5 * d * d / 0.5 : std::abs(d) - 0.25;
    }
    CHECK(ops::mse_loss(x, y).item() == doctest::Approx(mse));
    CHECK(ops::l1_loss(x, y, ops::Reduction::sum).item() == doctest::Approx(l1));
    CHECK(ops::smooth_l1_loss(x, y, 0.5, ops::Reduction::sum).item() == doctest::Approx(huber));
    CHECK(ops::mse_loss(x, y, ops::Reduction::none).shape() == Shape{2, 3});
    CHECK_THROWS_WITH_AS(ops::mse_loss(x, Tensor::from(b, {3, 2})),
                         doctest::Contains("mse_loss: 'input' is [2, 3] and 'target' [3, 2]: they need one shape"), Error);
}

TEST_CASE("binary cross-entropy from logits, with weights and pos_weight, without overflow") {
    const std::vector<double> z = {-3, -0.5, 0.2, 4, 60, -60}, t = {0, 1, 0.3, 1, 0, 1}, pw = {2, 0.5};
    double want = 0, want_pw = 0;
    for (std::size_t i = 0; i < 6; ++i) {
        const double s = 1 / (1 + std::exp(-z[i]));
        const double lp = std::log(std::max(s, 1e-300)), lq = std::log(std::max(1 - s, 1e-300));
        // log σ and log(1-σ) exactly for the large logits
        const double log_p = z[i] < -30 ? z[i] : lp, log_q = z[i] > 30 ? -z[i] : lq;
        want += -(t[i] * log_p + (1 - t[i]) * log_q) / 6;
        want_pw += -(pw[i % 2] * t[i] * log_p + (1 - t[i]) * log_q) / 6;
    }
    const Tensor logits = Tensor::from(z, {3, 2}), targets = Tensor::from(t, {3, 2});
    CHECK(ops::binary_cross_entropy_with_logits(logits, targets).item() == doctest::Approx(want));
    CHECK(ops::binary_cross_entropy_with_logits(logits, targets, {.pos_weight = Tensor::from(pw, {2})}).item() ==
          doctest::Approx(want_pw));
    const Tensor w = Tensor::full({3, 2}, 2, DType::f64);
    CHECK(ops::binary_cross_entropy_with_logits(logits, targets, {.weight = w}).item() == doctest::Approx(2 * want));
}

TEST_CASE("nll and cross-entropy: class weights, ignored rows, label smoothing as PyTorch computes them") {
    const std::int64_t rows = 4, classes = 3;
    const std::vector<double> z = normals(12, 3), w = {0.5, 2, 1};
    const std::vector<std::int32_t> t = {2, -100, 0, 1};
    const Tensor logits = Tensor::from(z, {rows, classes});
    const Tensor targets = Tensor::from(t, {rows});
    const Tensor weight = Tensor::from(w, {classes});
    // log p, and the sums PyTorch's definitions make of it.
    double nll_w = 0, weights = 0, smooth_w = 0, nll = 0, smooth = 0, counted = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        double m = -1e300, s = 0;
        for (int c = 0; c < classes; ++c) m = std::max(m, z[static_cast<std::size_t>(r * classes + c)]);
        for (int c = 0; c < classes; ++c) s += std::exp(z[static_cast<std::size_t>(r * classes + c)] - m);
        auto logp = [&](int c) { return z[static_cast<std::size_t>(r * classes + c)] - m - std::log(s); };
        if (t[static_cast<std::size_t>(r)] == -100) continue;
        const int y = t[static_cast<std::size_t>(r)];
        nll_w += -w[static_cast<std::size_t>(y)] * logp(y);
        weights += w[static_cast<std::size_t>(y)];
        nll += -logp(y);
        counted += 1;
        for (int c = 0; c < classes; ++c) {
            smooth_w += -w[static_cast<std::size_t>(c)] * logp(c);
            smooth += -logp(c);
        }
    }
    const Tensor logp = ops::log_softmax(logits, -1);
    CHECK(ops::nll_loss(logp, targets, {.weight = weight}).item() == doctest::Approx(nll_w / weights));
    CHECK(ops::nll_loss(logp, targets, {.reduction = ops::Reduction::sum}).item() == doctest::Approx(nll));
    // The options form without options is the fused kernel's answer.
    CHECK(ops::cross_entropy(logits, targets, ops::CrossEntropyOptions{}).item() ==
          doctest::Approx(ops::cross_entropy(logits, targets).item()));
    const double eps = 0.1;
    CHECK(ops::cross_entropy(logits, targets, ops::CrossEntropyOptions{.weight = weight, .label_smoothing = eps}).item() ==
          doctest::Approx((1 - eps) * nll_w / weights + eps / classes * smooth_w / weights));
    // Without weights, PyTorch's mean of the smoothing term divides by every row, ignored ones too.
    CHECK(ops::cross_entropy(logits, targets, ops::CrossEntropyOptions{.label_smoothing = eps}).item() ==
          doctest::Approx((1 - eps) * nll / counted + eps / classes * smooth / rows));
    CHECK_THROWS_WITH_AS(ops::nll_loss(logp, Tensor::from(std::vector<std::int32_t>{0, 1, 3, 0}, {rows})),
                         doctest::Contains("nll_loss: index 3"), Error);
    CHECK_THROWS_WITH_AS(ops::nll_loss(logp, Tensor::from(std::vector<std::int32_t>{0, 1}, {2})),
                         doctest::Contains("nll_loss: 'targets' is i32 [2] on cpu, but 'input' [4, 3] needs one target per row: [4]"),
                         Error);
}

// Reductions and softmax against values worked out by hand, on every layout
// the kernel has a loop for (rows, columns, the general walk), with ties and
// NaN; bad dimensions named.
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>

using namespace levers;

namespace {
Tensor ramp(Shape shape) {
    std::vector<double> v(static_cast<std::size_t>(shape.numel()));
    std::iota(v.begin(), v.end(), 0.0);
    return Tensor::from(v, shape);
}
}  // namespace

TEST_CASE("sum and mean over any dimensions, keepdim or not, any layout") {
    const Tensor x = ramp({2, 3, 4});  // x[i, j, k] = 12i + 4j + k
    CHECK(ops::sum(x).shape() == Shape{});
    CHECK(ops::sum(x).item() == 276);
    CHECK(ops::sum(x, {2}).values() == std::vector<double>{6, 22, 38, 54, 70, 86});           // rows
    CHECK(ops::sum(x, {0}).values() == std::vector<double>{12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34});  // columns
    CHECK(ops::sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
    CHECK(ops::sum(x, {0, 2}, true).values() == std::vector<double>{60, 92, 124});             // the general walk
    CHECK(ops::sum(x, {-1, -2}).values() == std::vector<double>{66, 210});
    CHECK(ops::mean(x, {1}).values()[0] == 4);
    // On a transposed view: the same sums.
    // [k, j]: Σ_i 12i + 4j + k = 12 + 8j + 2k.
    CHECK(ops::sum(x.transpose(0, 2), {2}).values() == std::vector<double>{12, 20, 28, 14, 22, 30, 16, 24, 32, 18, 26, 34});
    // Integers sum as integers; an empty reduction sums to zero.
    CHECK(ops::sum(Tensor::from(std::vector<std::int32_t>{2, 3}, {2})).item() == 5);
    CHECK(ops::sum(Tensor::zeros({3, 0}, DType::f64), {1}).values() == std::vector<double>{0, 0, 0});
    // A long f32 sum keeps its digits (blocks of float summed in double).
    const Tensor ones = Tensor::full({1 << 22}, 0.1, DType::f32);
    CHECK(ops::sum(ones).item() == doctest::Approx(0.1f * (1 << 22)).epsilon(1e-6));
}

TEST_CASE("max and min: values, the first index of a tie, NaN first; argmax over all elements") {
    const Tensor x = Tensor::from(std::vector<double>{1, 5, 5, -2, 0, 3}, {2, 3});
    const auto [values, indices] = ops::max(x, 1);
    CHECK(values.values() == std::vector<double>{5, 3});
    CHECK(indices.values() == std::vector<double>{1, 2});
    CHECK(indices.dtype() == DType::i32);
    CHECK(ops::min(x, 0).indices.values() == std::vector<double>{1, 1, 1});
    CHECK(ops::amax(x).item() == 5);
    CHECK(ops::amin(x, {1}, true).shape() == Shape{2, 1});
    CHECK(ops::argmax(x).item() == 1);
    CHECK(ops::argmin(x, 0).values() == std::vector<double>{1, 1, 1});
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor with_nan = Tensor::from(std::vector<double>{1, nan, 3, nan}, {4});
    CHECK(ops::argmax(with_nan).item() == 1);
    CHECK(std::isnan(ops::amax(with_nan).item()));
    // The gradient of max goes to the element chosen; of amax, shared among ties.
    Tensor g = Tensor::from(std::vector<double>{1, 5, 5}, {3}).requires_grad_();
    ops::max(g, 0).values.backward();
    CHECK(g.grad().values() == std::vector<double>{0, 1, 0});
    Tensor h = Tensor::from(std::vector<double>{1, 5, 5}, {3}).requires_grad_();
    ops::amax(h).backward();
    CHECK(h.grad().values() == std::vector<double>{0, 0.5, 0.5});
}

TEST_CASE("max down columns and over several dimensions: the first of ties, NaN first, as one element at a time") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // x [3, 4, 8]: few distinct values (ties everywhere, as after a ReLU), a NaN in some places.
    std::vector<double> v(3 * 4 * 8);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 3 ? nan : static_cast<double>((i * 5) % 3);
    const Tensor x = Tensor::from(v, {3, 4, 8});
    const auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) { return v[static_cast<std::size_t>((i * 4 + j) * 8 + k)]; };
    // Over dimension 1 (down columns: the kept 8 innermost): the first largest of x[i, :, k], NaN first.
    const auto down = ops::max(x, 1);
    for (std::int64_t i = 0; i < 3; ++i)
        for (std::int64_t k = 0; k < 8; ++k) {
            std::int64_t best = 0;
            for (std::int64_t j = 1; j < 4; ++j)
                if (!std::isnan(at(i, best, k)) && (std::isnan(at(i, j, k)) || at(i, j, k) > at(i, best, k))) best = j;
            CAPTURE(i);
            CAPTURE(k);
            CHECK(down.indices.values()[static_cast<std::size_t>(i * 8 + k)] == best);
        }
    // Over dimension 0 of [3, 32] viewed as x [3, 4, 8] minus its last column (kept 4 x 7, not contiguous: the
    // general walk, a strided run): the same rule.
    const auto walk = ops::max(x.narrow(2, 0, 7), 0);
    for (std::int64_t j = 0; j < 4; ++j)
        for (std::int64_t k = 0; k < 7; ++k) {
            std::int64_t best = 0;
            for (std::int64_t i = 1; i < 3; ++i)
                if (!std::isnan(at(best, j, k)) && (std::isnan(at(i, j, k)) || at(i, j, k) > at(best, j, k))) best = i;
            CHECK(walk.indices.values()[static_cast<std::size_t>(j * 7 + k)] == best);
        }
    // Over dimensions 0 and 2 (the general walk, a contiguous run along the last at a time), in f32.
    const Tensor f32 = x.to(DType::f32);
    const Tensor largest = ops::amax(f32, {0, 2});
    const Tensor whole = ops::sum(ops::where(f32 != f32, 0.0, f32), {0, 2});  // NaN as 0
    for (std::int64_t j = 0; j < 4; ++j) {
        CAPTURE(j);
        double total = 0, top = -1;
        bool any_nan = false;
        for (std::int64_t i = 0; i < 3; ++i)
            for (std::int64_t k = 0; k < 8; ++k) {
                any_nan |= std::isnan(at(i, j, k));
                if (!std::isnan(at(i, j, k))) total += at(i, j, k), top = std::max(top, at(i, j, k));
            }
        CHECK(whole.values()[static_cast<std::size_t>(j)] == total);
        const double got = largest.values()[static_cast<std::size_t>(j)];
        CHECK((any_nan ? std::isnan(got) : got == top));
    }
}

TEST_CASE("var, std_dev, norm and logsumexp") {
    const Tensor x = Tensor::from(std::vector<double>{1, 2, 3, 4}, {4});
    CHECK(ops::var(x).item() == doctest::Approx(5.0 / 3));
    CHECK(ops::var(x, {}, 0).item() == doctest::Approx(1.25));
    CHECK(ops::std_dev(x).item() == doctest::Approx(std::sqrt(5.0 / 3)));
    CHECK(ops::norm(x).item() == doctest::Approx(std::sqrt(30.0)));
    CHECK(ops::norm(x, 1).item() == 10);
    CHECK(ops::norm(-x, std::numeric_limits<double>::infinity()).item() == 4);
    CHECK(ops::norm(x, 3).item() == doctest::Approx(std::cbrt(100.0)));
    CHECK(ops::logsumexp(x, {0}).item() == doctest::Approx(std::log(std::exp(1.) + std::exp(2.) + std::exp(3.) + std::exp(4.))));
    // No overflow, and a row of -infinity stays -infinity.
    CHECK(ops::logsumexp(Tensor::from(std::vector<double>{1000, 1000}, {2}), {0}).item() == doctest::Approx(1000 + std::log(2.0)));
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(ops::logsumexp(Tensor::from(std::vector<double>{-inf, -inf}, {2}), {0}).item() == -inf);
}

TEST_CASE("softmax and log_softmax along any dimension") {
    const Tensor x = Tensor::from(std::vector<double>{1, 2, 3, 1, 1, 1}, {2, 3});
    const auto p = ops::softmax(x, -1).values();
    const double z = std::exp(1.) + std::exp(2.) + std::exp(3.);
    CHECK(p[0] == doctest::Approx(std::exp(1.) / z));
    CHECK(p[4] == doctest::Approx(1.0 / 3));
    const auto q = ops::softmax(x, 0).values();  // down the columns
    CHECK(q[0] == doctest::Approx(0.5));
    CHECK(q[2] == doctest::Approx(std::exp(3.) / (std::exp(3.) + std::exp(1.))));
    const auto lp = ops::log_softmax(x, 1).values();
    CHECK(lp[2] == doctest::Approx(3 - std::log(z)));
    CHECK(ops::softmax(Tensor::from(std::vector<double>{1000, 0}, {2})).values()[0] == 1);  // no overflow
}

TEST_CASE("bad dimensions and empty extremes are refused, naming the op") {
    const Tensor x = ramp({2, 3});
    CHECK_THROWS_WITH_AS(ops::sum(x, {2}), doctest::Contains("sum: dimension 2 does not exist in a tensor of 2 dimensions"), Error);
    CHECK_THROWS_WITH_AS(ops::sum(x, {1, -1}), doctest::Contains("sum: dimension -1 is named twice"), Error);
    CHECK_THROWS_WITH_AS(ops::max(x, -3), doctest::Contains("max: dimension -3 does not exist"), Error);
    CHECK_THROWS_WITH_AS(ops::amax(Tensor::zeros({0}, DType::f64)), doctest::Contains("amax: the maximum of no elements"), Error);
    CHECK_THROWS_WITH_AS(ops::softmax(x, 5), doctest::Contains("softmax: dimension 5 does not exist"), Error);
    CHECK_THROWS_WITH_AS(ops::norm(x, 0), doctest::Contains("norm: p must be positive"), Error);
}

#include "levers/kernels/cross_entropy.hpp"
#include "tests/gradcheck.hpp"

#include <cmath>

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("cross-entropy of uniform logits is log(vocab)") {
    std::vector<double> logits(2 * 8, 0.5), lse(2);
    std::vector<std::int32_t> targets = {3, 7};
    CHECK(k::cross_entropy_forward(lse.data(), logits.data(), targets.data(), 2, 8) == doctest::Approx(std::log(8.0)));
}

TEST_CASE("cross-entropy ignores padded rows in the mean and the gradient") {
    const long rows = 4, V = 5;
    Rng rng(9);
    auto logits = random_vector(rows * V, rng, 3.0);
    std::vector<std::int32_t> targets = {1, -100, 4, -100};
    std::vector<double> lse(rows);
    double loss = k::cross_entropy_forward(lse.data(), logits.data(), targets.data(), rows, V);
    double expect = 0;
    for (long r : {0L, 2L}) expect += lse[r] - logits[r * V + targets[r]];
    CHECK(loss == doctest::Approx(expect / 2));
    for (long r = 0; r < rows; ++r) CHECK(lse[r] == doctest::Approx(kernels::logsumexp_row(&logits[r * V], V)));

    auto f = [&] { return k::cross_entropy_forward(lse.data(), logits.data(), targets.data(), rows, V); };
    std::vector<double> grad(rows * V, 9.0);
    k::cross_entropy_backward(grad.data(), lse.data(), logits.data(), targets.data(), 1.0, rows, V);
    for (long j = 0; j < V; ++j) CHECK(grad[1 * V + j] == 0.0);
    check_gradient("d_logits", logits.data(), grad.data(), logits.size(), f);

    // In place: the gradient may overwrite the logits.
    auto in_place = logits;
    k::cross_entropy_backward(in_place.data(), lse.data(), in_place.data(), targets.data(), 1.0, rows, V);
    CHECK(in_place == grad);
}

TEST_CASE("cross-entropy rejects a target outside the vocabulary") {
    std::vector<float> logits(2 * 3), lse(2);
    std::vector<std::int32_t> targets = {0, 3};
    CHECK_THROWS_WITH_AS(k::cross_entropy_forward(lse.data(), logits.data(), targets.data(), 2, 3),
                         doctest::Contains("target 3 in row 1 is outside [0, 3)"), Error);
}

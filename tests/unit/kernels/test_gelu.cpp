#include "levers/kernels/gelu.hpp"
#include "tests/gradcheck.hpp"

#include <algorithm>
#include <cmath>

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("gelu (tanh form) at known points") {
    CHECK(kernels::gelu_value(0.0) == 0.0);
    CHECK(kernels::gelu_value(1.0) == doctest::Approx(0.8411919906082768));  // PyTorch, approximate='tanh'
    CHECK(kernels::gelu_value(-2.0) == doctest::Approx(-0.04540230591222494));
}

TEST_CASE("the vectorised CPU gelu agrees with the scalar maths the CUDA kernel uses") {
    std::vector<float> x(4001), y(x.size()), g(x.size()), ones(x.size(), 1.0f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -10.0f + 0.005f * static_cast<float>(i);
    k::gelu_forward(y.data(), x.data(), static_cast<long>(x.size()));
    k::gelu_backward(g.data(), ones.data(), x.data(), static_cast<long>(x.size()));
    // In float, 1 + tanh(u) cancels for u near -3 and below: absolute errors of a
    // few 1e-7 on values around 1e-4, as in any float32 GELU.
    double worst_value = 0, worst_grad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double xi = x[i];
        worst_value = std::max(worst_value, std::abs(y[i] - kernels::gelu_value(xi)) / (1 + std::abs(kernels::gelu_value(xi))));
        worst_grad = std::max(worst_grad, std::abs(g[i] - kernels::gelu_grad(xi)) / (1 + std::abs(kernels::gelu_grad(xi))));
    }
    CHECK(worst_value < 1e-5);
    CHECK(worst_grad < 1e-5);
}

TEST_CASE("gelu gradient matches finite differences") {
    Rng rng(4);
    auto x = random_vector(50, rng, 3.0), r = random_vector(50, rng);
    auto loss = [&] {
        std::vector<double> out(x.size());
        k::gelu_forward(out.data(), x.data(), static_cast<long>(x.size()));
        return dot(out, r);
    };
    std::vector<double> dx(x.size());
    k::gelu_backward(dx.data(), r.data(), x.data(), static_cast<long>(x.size()));
    check_gradient("d_in", x.data(), dx.data(), x.size(), loss);
}

#include "kernels/gelu.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;
namespace k = levers::kernels::cpu;

TEST_CASE("gelu (tanh form) at known points") {
    CHECK(kernels::gelu_value(0.0) == 0.0);
    CHECK(kernels::gelu_value(1.0) == doctest::Approx(0.8411919906082768));  // PyTorch, approximate='tanh'
    CHECK(kernels::gelu_value(-2.0) == doctest::Approx(-0.04540230591222494));
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

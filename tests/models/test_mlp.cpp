#include "models/mlp.hpp"
#include "tests/gradcheck.hpp"

using namespace levers;
using namespace levers::testing;

TEST_CASE("MLP: every parameter's gradient matches finite differences (double)") {
    models::Mlp<double> mlp({.inputs = 5, .hidden = {7, 6}, .classes = 4}, 3);
    Rng rng(4);
    auto x = random_vector(3 * 5, rng);
    std::vector<std::int32_t> labels = {0, 3, 2};
    auto loss = [&] { return mlp.forward(x.data(), labels.data(), 3); };
    loss();
    mlp.params().zero_grad();
    mlp.backward();
    double* p = mlp.params().params().data<double>();
    const double* g = mlp.params().grads().data<double>();
    std::vector<double> grad(g, g + mlp.params().size());
    check_gradient("MLP parameters", p, grad.data(), grad.size(), loss);
}

TEST_CASE("MLP: a config with a zero width is refused") {
    CHECK_THROWS_WITH_AS(models::Mlp<float>({.inputs = 4, .hidden = {8, 0}, .classes = 3}, 0),
                         doctest::Contains("hidden widths must be >= 1, got 0"), Error);
}

TEST_CASE("MLP: to_device on the CPU keeps it there; bf16 there is refused, naming what would work") {
    const models::MlpConfig config{.inputs = 3, .hidden = {4}, .classes = 2};
    models::Mlp<double> m64(config, 1);
    m64.to_device(Device::cpu());
    CHECK(m64.device().is_cpu());
    models::Mlp<float> m32(config, 1);
    CHECK_THROWS_WITH_AS(m32.to_device(Device::cpu(), DType::bf16), doctest::Contains("bf16 needs a card"), Error);
}

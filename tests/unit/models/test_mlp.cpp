#include "levers/core/rng.hpp"
#include "levers/nn/gradcheck.hpp"
#include "levers/models/mlp.hpp"

#include <doctest/doctest.h>

using namespace levers;

TEST_CASE("MLP: every parameter's gradient matches finite differences (double)") {
    models::Mlp mlp({.inputs = 5, .hidden = {7, 6}, .classes = 4}, 3);
    mlp.to(Device::cpu(), DType::f64);
    Rng rng(4);
    std::vector<double> xs(3 * 5);
    for (double& v : xs) v = rng.normal();
    const Tensor x = Tensor::from(xs, {3, 5});
    const Tensor labels = Tensor::from(std::vector<std::int32_t>{0, 3, 2}, {3});
    const auto report = nn::check_parameter_gradients(mlp, [&] { return mlp.loss(x, labels); });
    INFO(report.str());
    CHECK(report.passed);
    CHECK(mlp.params().entries()[2].name == "layers.1.weight");
}

TEST_CASE("MLP: a config with a zero width is refused, and so is an input of the wrong width") {
    CHECK_THROWS_WITH_AS(models::Mlp({.inputs = 4, .hidden = {8, 0}, .classes = 3}, 0),
                         doctest::Contains("hidden widths must be >= 1, got 0"), Error);
    models::Mlp mlp({.inputs = 4, .hidden = {8}, .classes = 3}, 0);
    CHECK_THROWS_WITH_AS(mlp.logits(Tensor::zeros({2, 5}, DType::f32)), doctest::Contains("needs x [batch >= 1, 4]"),
                         Error);
}

TEST_CASE("MLP: to() on the CPU keeps it there; bf16 there is refused, naming what would work") {
    const models::MlpConfig config{.inputs = 3, .hidden = {4}, .classes = 2};
    models::Mlp m(config, 1);
    m.to(Device::cpu(), DType::f64);
    CHECK(m.device().is_cpu());
    CHECK_THROWS_WITH_AS(m.to(Device::cpu(), DType::bf16), doctest::Contains("bf16 needs a GPU"), Error);
}

// The Llama-style block a user writes from general ops alone
// (examples/user_project/llama_block.hpp) against the same block in PyTorch
// (tests/reference/llama_block.py, float64, its output committed beside it):
// the loss and every gradient, in f64 and f32; then it trains.
#include "examples/user_project/llama_block.hpp"
#include "levers/core/rng.hpp"
#include "levers/train/optimizer.hpp"
#include "tests/source_tree.hpp"

#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace levers;
using levers::testing::relative_error;

namespace {

nlohmann::json block_reference() {
    std::ifstream in(testing::source_path("tests/reference/llama_block.json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

Tensor tensor_of(const nlohmann::json& values, const nlohmann::json& shape, DType dtype) {
    return Tensor::from(values.get<std::vector<double>>(), Shape(shape.get<std::vector<std::int64_t>>()))
        .to(Device::cpu(), dtype);
}

// Loads the reference's weights into a block computing in `dtype`, runs
// forward and backward, and compares the loss and every gradient.
void check_against_reference(DType dtype, double tolerance) {
    const nlohmann::json ref = block_reference();
    const auto& c = ref["config"];
    user::LlamaBlock block({.dim = c["dim"], .heads = c["heads"], .kv_heads = c["kv_heads"], .hidden = c["hidden"],
                            .rope_theta = c["rope_theta"], .eps = c["eps"]},
                           1);
    block.to(Device::cpu(), dtype);
    int loaded = 0;
    for (const auto& [name, p] : block.named_parameters()) {
        CAPTURE(name);
        REQUIRE(ref["weights"].contains(name));
        const auto& w = ref["weights"][name];
        p->value().copy_from(tensor_of(w["values"], w["shape"], p->value().dtype()));
        ++loaded;
    }
    CHECK(loaded == static_cast<int>(ref["weights"].size()));
    block.parameters_changed();
    Tensor x = tensor_of(ref["input"]["values"], ref["input"]["shape"], dtype).requires_grad_();
    const Tensor probe = tensor_of(ref["probe"], ref["input"]["shape"], dtype);
    block.params().zero_grad();
    const Tensor loss = ops::sum(block(x) * probe);
    loss.backward();
    const double want = ref["loss"];
    CHECK(std::abs(loss.item() - want) <= tolerance * std::abs(want));
    CHECK(relative_error(x.grad().values(), ref["grad_input"].get<std::vector<double>>()) <= tolerance);
    for (const auto& [name, p] : block.named_parameters()) {
        CAPTURE(name);
        const ParamSet& set = block.params();
        const Tensor grad = set.grad_tensor(set.find(name));
        CHECK(relative_error(grad.values(), ref["grads"][name].get<std::vector<double>>()) <= tolerance);
    }
}

}  // namespace

TEST_CASE("a Llama-style block written from general ops matches PyTorch: loss and every gradient, f64 and f32") {
    check_against_reference(DType::f64, 1e-10);
    check_against_reference(DType::f32, 1e-5);
}

TEST_CASE("the Llama-style block trains: AdamW halves its error on a fixed target in 60 steps") {
    user::LlamaBlock block({}, 3);
    Rng rng(4);
    std::vector<double> xs(2 * 8 * 16), ys(xs.size());
    for (double& v : xs) v = rng.normal();
    for (double& v : ys) v = 0.5 * rng.normal();
    const Tensor x = Tensor::from(xs, {2, 8, 16}).to(Device::cpu(), DType::f32);
    const Tensor y = Tensor::from(ys, {2, 8, 16}).to(Device::cpu(), DType::f32);
    train::AdamW adamw(block.params(), {.lr = 1e-2});
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
        block.params().zero_grad();
        const Tensor loss = ops::mse_loss(block(x), y);
        loss.backward();
        adamw.step(1e-2);
        (step == 0 ? first : last) = loss.item();
    }
    CHECK(last < first / 2);
}

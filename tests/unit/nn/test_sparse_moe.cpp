// The sparse mixture of experts (levers/nn/sparse_moe.hpp) against PyTorch
// computing what transformers' Qwen3-MoE and Mixtral blocks compute
// (tests/reference/moe_block.py): the output, the router's scores, each
// token's experts, the loss and every gradient, in f64 and f32, with and
// without norm_topk_prob; topk itself; and the options refused.
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/topk.hpp"
#include "levers/nn/sparse_moe.hpp"
#include "tests/source_tree.hpp"

#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace levers;
using levers::testing::relative_error;

namespace {

void check_case(const nlohmann::json& ref, const nlohmann::json& c, DType dtype, double tolerance) {
    const std::int64_t dim = ref["dim"], b = ref["batch"], t = ref["time"];
    nn::SparseMoe block({.dim = dim, .hidden = ref["hidden"], .experts = ref["experts"], .top_k = ref["top_k"],
                         .norm_topk_prob = c["norm_topk_prob"]});
    block.to(Device::cpu(), dtype);
    for (const auto& [name, p] : block.named_parameters()) {
        CAPTURE(name);
        REQUIRE(c["weights"].contains(name));
        p->value().copy_from(Tensor::from(c["weights"][name].get<std::vector<double>>(),
                                          Shape(c["shapes"][name].get<std::vector<std::int64_t>>()))
                                 .to(p->value().dtype()));
    }
    block.parameters_changed();
    Tensor x = Tensor::from(c["x"].get<std::vector<double>>(), {b, t, dim}).to(dtype).requires_grad_();
    const Tensor r = Tensor::from(c["r"].get<std::vector<double>>(), {b, t, dim}).to(dtype);
    block.params().zero_grad();
    const Tensor out = block(x);
    const Tensor loss = ops::sum(out * r);
    loss.backward();
    CHECK(relative_error(out.values(), c["out"].get<std::vector<double>>()) <= tolerance);
    CHECK(relative_error(block.router_logits().values(), c["router_logits"].get<std::vector<double>>()) <= tolerance);
    CHECK(std::abs(loss.item() - c["loss"].get<double>()) <= tolerance * std::abs(c["loss"].get<double>()));
    // Each token's experts, as counted.
    std::vector<std::int64_t> counts(static_cast<std::size_t>(ref["experts"].get<int>()), 0);
    for (int e : c["selected"].get<std::vector<int>>()) ++counts[static_cast<std::size_t>(e)];
    CHECK(block.tokens_per_expert() == counts);
    CHECK(relative_error(x.grad().values(), c["x_grad"].get<std::vector<double>>()) <= tolerance);
    for (const auto& [name, p] : block.named_parameters()) {
        CAPTURE(name);
        const ParamSet& set = block.params();
        CHECK(relative_error(set.grad_tensor(set.find(name)).values(), c["grads"][name].get<std::vector<double>>()) <=
              tolerance);
    }
}

}  // namespace

TEST_CASE("a sparse mixture of experts matches PyTorch computing transformers' block: output, routing, loss and "
          "every gradient, f64 and f32, with and without norm_topk_prob") {
    std::ifstream in(testing::source_path("tests/reference/moe_block.json"));
    REQUIRE(in.good());
    const auto ref = nlohmann::json::parse(in);
    for (const auto& c : ref["cases"]) {
        CAPTURE(c["norm_topk_prob"].get<bool>());
        check_case(ref, c, DType::f64, 1e-10);
        check_case(ref, c, DType::f32, 1e-5);
    }
}

TEST_CASE("topk: each row's k largest, largest first, the lower index of equal ones first; values differentiable") {
    Tensor x = Tensor::from(std::vector<double>{0.1, 0.7, 0.2, 0.7, -1.0, 3.0, 2.0, 1.0}, {2, 4}).requires_grad_();
    auto [values, index] = ops::topk(x, 2);
    CHECK(index.values() == std::vector<double>{1, 3, 1, 2});
    CHECK(values.values() == std::vector<double>{0.7, 0.7, 3.0, 2.0});
    ops::sum(values * Tensor::from(std::vector<double>{1, 2, 3, 4}, {2, 2})).backward();
    CHECK(x.grad().values() == std::vector<double>{0, 1, 0, 2, 0, 3, 4, 0});
    CHECK_THROWS_WITH(ops::topk(x, 5), doctest::Contains("topk: k = 5 of rows of 4; k must be in [1, 4]"));
    CHECK_THROWS_WITH(nn::SparseMoe({.dim = 8, .hidden = 4, .experts = 4, .top_k = 5}),
                      doctest::Contains("num_experts_per_tok = 5 of 4 experts; give 1..4"));
}

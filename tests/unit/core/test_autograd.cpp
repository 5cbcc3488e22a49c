// The autograd engine itself: sums where a tensor feeds several ops, shared
// gradients copied before they are added into, views and slices, leaves,
// inference mode, a freed graph, a graph dropped when nothing holds it, and
// the finality a parameter set hears as backward goes.
#include "levers/core/autograd.hpp"
#include "levers/core/params.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace levers;

namespace {
Tensor leaf(std::vector<double> v, Shape s) { return Tensor::from(v, s).requires_grad_(); }
}  // namespace

TEST_CASE("autograd: a tensor used twice gets the sum of both gradients; shared gradients are not corrupted") {
    const Tensor x = leaf({1, 2, 3}, {3});
    const Tensor y = ops::add(x, x);          // dy/dx = 2
    const Tensor z = ops::add(y, ops::add(y, x));  // z = 2y + x = 5x
    z.backward(Tensor::from(std::vector<double>{1, 10, 100}, {3}));
    CHECK(x.grad().values() == std::vector<double>{5, 50, 500});
    // add's backward hands the same gradient to both inputs; adding a second
    // contribution into one of them must not change the other.
    const Tensor a = leaf({1, 1}, {2}), b = leaf({2, 2}, {2});
    const Tensor s = ops::add(a, b);
    const Tensor t = ops::add(s, a);  // a gets d_t twice (through s and directly), b once
    t.backward(Tensor::from(std::vector<double>{3, 4}, {2}));
    CHECK(a.grad().values() == std::vector<double>{6, 8});
    CHECK(b.grad().values() == std::vector<double>{3, 4});
}

TEST_CASE("autograd: views and slices pass gradients back to where the elements came from") {
    const Tensor x = leaf({1, 2, 3, 4, 5, 6}, {3, 2});
    const Tensor rows = x.slice(1, 3).view({4});
    const Tensor y = ops::add(rows, rows);
    y.backward(Tensor::from(std::vector<double>{1, 2, 3, 4}, {4}));
    CHECK(x.grad().values() == std::vector<double>{0, 0, 2, 4, 6, 8});
}

TEST_CASE("autograd: leaves accumulate over backward passes; InferenceMode records nothing") {
    const Tensor w = leaf({0.5, -1}, {1, 2});
    const Tensor x = Tensor::from(std::vector<double>{2, 3}, {1, 2});
    for (int i = 0; i < 2; ++i) ops::linear(x, w).backward();
    CHECK(w.grad().values() == std::vector<double>{4, 6});  // twice d(x·w)/dw = x
    {
        autograd::InferenceMode inference;
        CHECK_FALSE(autograd::grad_enabled());
        const Tensor y = ops::linear(x, w);
        CHECK_FALSE(y.requires_grad());
        CHECK(autograd::tape().nodes() == 0);
    }
    CHECK(autograd::grad_enabled());
    CHECK_THROWS_WITH_AS(ops::linear(x, w).requires_grad_(), doctest::Contains("only leaves"), Error);
}

TEST_CASE("autograd: backward of a freed graph, of no graph, or of a non-scalar without its gradient is refused") {
    const Tensor w = leaf({1, 2}, {2});
    const Tensor y = ops::gelu(w);
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("backward of a [2] tensor needs its gradient"), Error);
    const Tensor s = ops::cross_entropy(y.view({1, 2}), Tensor::from(std::vector<std::int32_t>{1}, {1}));
    s.backward();
    CHECK_THROWS_WITH_AS(s.backward(), doctest::Contains("an earlier backward already freed"), Error);
    // An op on a tensor whose graph is gone, then backward through it: refused too, naming the op.
    const Tensor again = ops::gelu(y);
    CHECK_THROWS_WITH_AS(again.backward(Tensor::from(std::vector<double>{1, 1}, {2})),
                         doctest::Contains("gelu: backward reached a tensor whose graph an earlier backward"), Error);
    CHECK_THROWS_WITH_AS(Tensor::from(std::vector<double>{1}, {1}).backward(),
                         doctest::Contains("was not computed by recorded ops"), Error);
}

TEST_CASE("autograd: a graph nobody holds any more is dropped before the next one is recorded") {
    const Tensor w = leaf({1, 2, 3}, {3});
    { const Tensor y = ops::gelu(ops::gelu(w)); CHECK(autograd::tape().nodes() >= 2); }
    const Tensor z = ops::gelu(w);  // the old graph's tensors are gone: the tape starts again
    CHECK(autograd::tape().nodes() == 1);
    z.backward(Tensor::from(std::vector<double>{1, 1, 1}, {3}));
    CHECK(autograd::tape().nodes() == 0);  // backward consumed it all
}

TEST_CASE("autograd: an op used wrongly names the op, the argument and both shapes") {
    const Tensor x = Tensor::zeros({2, 5}, DType::f32), w = Tensor::zeros({4, 6}, DType::f32);
    CHECK_THROWS_WITH_AS(ops::linear(x, w), doctest::Contains("linear: 'weight' is f32 [4, 6] on cpu, but 'input' [2, 5] "
                                                              "needs [*, 5]"),
                         Error);
    const Tensor w64 = Tensor::zeros({4, 5}, DType::f64);
    CHECK_THROWS_WITH_AS(ops::linear(x, w64), doctest::Contains("linear: 'weight' is f64 [4, 5] on cpu, but 'input' is "
                                                                "f32 [2, 5] on cpu"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::add(x, Tensor::zeros({5, 2}, DType::f32)),
                         doctest::Contains("add: 'b' is f32 [5, 2] on cpu, but 'a' is [2, 5]"), Error);
    CHECK_THROWS_WITH_AS(ops::attention(Tensor::zeros({2, 3, 10}, DType::f32), 2),
                         doctest::Contains("attention: 'qkv' is f32 [2, 3, 10] on cpu, expected [batch, time, 3 x "
                                           "channels]"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::cross_entropy(x, Tensor::zeros({3}, DType::i32)),
                         doctest::Contains("cross_entropy: 'targets' is i32 [3] on cpu, but 2 rows of logits need 2"),
                         Error);
    CHECK_THROWS_AS(ops::gelu(Tensor::zeros({2}, DType::i32)), Error);
}

TEST_CASE("autograd: a parameter set's listener hears the plan, then each gradient final as backward passes its "
          "first use") {
    // Three layers; the set lists them in forward order, so finality comes from the end.
    nn::Sequential net;
    net.add<nn::Linear>(4, 4);
    net.add<nn::GELU>();
    net.add<nn::Linear>(4, 4);
    net.add<nn::Linear>(4, 3, /*bias=*/false);
    net.initialize(1);
    ParamSet& params = net.parameters();
    struct Heard final : GradHooks {
        std::vector<std::string> calls;
        void backward_begins() override { calls.push_back("begins"); }
        void will_compute(int entry) override { calls.push_back(fmt::format("computes {}", entry)); }
        void planned() override { calls.push_back("planned"); }
        void grad_final(int entry, Tensor& grad) override {
            calls.push_back(fmt::format("final {}{}", entry, grad.defined() ? "" : " without its gradient"));
        }
    } heard;
    params.set_grad_hooks(&heard);
    const Tensor x = Tensor::from(std::vector<float>(8, 0.5f), {2, 4});
    const Tensor loss = ops::cross_entropy(net(x), Tensor::from(std::vector<std::int32_t>{0, 2}, {2}));
    loss.backward();
    params.set_grad_hooks(nullptr);
    // Entries: 0, 1 (first linear), 2, 3 (second), 4 (third, no bias): all used, then final from the end.
    const std::vector<std::string> expected = {"begins",  "computes 0", "computes 1", "computes 2", "computes 3",
                                               "computes 4", "planned", "final 4",    "final 3",    "final 2",
                                               "final 1",   "final 0"};
    REQUIRE(params.entries().size() == 5);
    std::vector<std::string> sorted_plan(heard.calls.begin() + 1, heard.calls.begin() + 6);
    std::sort(sorted_plan.begin(), sorted_plan.end());  // the plan's order is the tape's leaves', any
    CHECK(heard.calls.front() == "begins");
    CHECK(sorted_plan == std::vector<std::string>(expected.begin() + 1, expected.begin() + 6));
    CHECK(std::vector<std::string>(heard.calls.begin() + 6, heard.calls.end()) ==
          std::vector<std::string>(expected.begin() + 6, expected.end()));
}

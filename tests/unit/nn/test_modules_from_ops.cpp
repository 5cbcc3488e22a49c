// The modules made of the general ops: RMSNorm, the activations, Conv2d and
// pooling, rotary embeddings, the gated MLP and the general attention (its
// packed route equal to the written-out one), each against its definition
// and finite differences.
#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;

namespace {
Tensor random_tensor(Shape shape, std::uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<double> v(static_cast<std::size_t>(shape.numel()));
    for (double& x : v) x = rng.normal() * scale;
    return Tensor::from(v, shape);
}
void check_near(const std::vector<double>& got, const std::vector<double>& want, double eps = 1e-12) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(eps));
}

// A tiny Llama-style block of levers' modules, for the gradient checks.
struct OpsBlock : nn::Layer {
    nn::RMSNorm attn_norm;
    nn::Attention attn;
    nn::RMSNorm mlp_norm;
    nn::GatedMLP mlp;
    OpsBlock(std::int64_t dim, std::int64_t heads, std::int64_t kv_heads, bool bias)
        : attn_norm(*this, "attn_norm", dim),
          attn(*this, "attn", dim, heads, {.kv_heads = kv_heads, .bias = bias, .rope_theta = 10000}),
          mlp_norm(*this, "mlp_norm", dim),
          mlp(*this, "mlp", dim, 3 * dim) {
        initialize(7);
    }
    Tensor forward(const Tensor& x) override {
        const Tensor h = x + attn(attn_norm(x));
        return h + mlp(mlp_norm(h));
    }
};
}  // namespace

TEST_CASE("RMSNorm: x / sqrt(mean(x^2) + eps) times its weight") {
    nn::RMSNorm norm(3, 1e-6);
    norm.initialize(1);
    norm.to(Device::cpu(), DType::f64);
    norm.weight.value().copy_from(Tensor::from(std::vector<double>{1, 2, 3}, {3}));
    norm.parameters_changed();
    const Tensor x = Tensor::from(std::vector<double>{1, -2, 2, 0, 0, 3}, {2, 3});
    const double r0 = 1 / std::sqrt(3 + 1e-6), r1 = 1 / std::sqrt(3 + 1e-6);
    check_near(norm(x).values(), {1 * r0, -4 * r0, 6 * r0, 0, 0, 9 * r1});
}

TEST_CASE("activations and Flatten are their ops") {
    const Tensor x = random_tensor({2, 3, 2, 2}, 3);
    CHECK(nn::SiLU()(x).values() == ops::silu(x).values());
    CHECK(nn::ReLU()(x).values() == ops::relu(x).values());
    CHECK(nn::Sigmoid()(x).values() == ops::sigmoid(x).values());
    CHECK(nn::Tanh()(x).values() == ops::tanh(x).values());
    CHECK(nn::GELU(ops::GeluForm::erf)(x).values() == ops::gelu_erf(x).values());
    CHECK(nn::Flatten()(x).shape() == Shape{2, 12});
}

TEST_CASE("Conv2d: PyTorch's layout, initialisation bounds, and its op") {
    nn::Conv2d conv(4, 6, {3, 2}, {.stride = {2, 1}, .padding = {1, 0}, .groups = 2});
    conv.initialize(5);
    conv.to(Device::cpu(), DType::f64);
    CHECK(conv.weight.shape() == Shape{6, 2, 3, 2});
    const double bound = 1 / std::sqrt(2.0 * 3 * 2);
    for (const double w : conv.weight.value().values()) CHECK(std::abs(w) <= bound);
    for (const double b : conv.bias->value().values()) CHECK(std::abs(b) <= bound);
    const Tensor x = random_tensor({2, 4, 5, 5}, 6);
    CHECK(conv(x).values() == ops::conv2d(x, conv.weight(), (*conv.bias)(), {2, 1}, {1, 0}, {1, 1}, 2).values());
    CHECK(nn::MaxPool2d({2, 2})(x).shape() == Shape{2, 4, 2, 2});
    CHECK(nn::AvgPool2d({3, 3}, {1, 1}, {1, 1})(x).shape() == Shape{2, 4, 5, 5});
    CHECK_THROWS_WITH_AS(nn::Conv2d(3, 4, {3, 3}, {.groups = 2}), doctest::Contains("Conv2d: 3 input and 4 output channels do not split into 2 groups"),
                         Error);
}

TEST_CASE("rotary embeddings: Hugging Face's halves, relative positions, explicit positions, either layout") {
    nn::RotaryEmbedding module(4, 100.0);
    using Layout = nn::RotaryEmbedding::Layout;
    struct {
        nn::RotaryEmbedding& m;
        Tensor apply(const Tensor& x, std::int64_t start = 0) { return m.apply(x, Layout::time_heads, start); }
        Tensor apply(const Tensor& x, const Tensor& positions) { return m.apply(x, Layout::time_heads, positions); }
    } rope{module};
    const Tensor q = random_tensor({1, 3, 2, 4}, 8), k = random_tensor({1, 3, 2, 4}, 9);  // [B, T, H, D]
    // Position 0 is the identity; position p rotates pair (i, i + D/2) by p · 100^(-2i/D).
    check_near(rope.apply(q).select(1, 0).values(), q.select(1, 0).values());
    const std::vector<double> x = q.select(1, 2).select(1, 1).values(), y = rope.apply(q).select(1, 2).select(1, 1).values();
    for (int i = 0; i < 2; ++i) {
        const double angle = 2 * std::pow(100.0, -2.0 * i / 4), c = std::cos(angle), s = std::sin(angle);
        CHECK(y[static_cast<std::size_t>(i)] == doctest::Approx(x[static_cast<std::size_t>(i)] * c - x[static_cast<std::size_t>(i + 2)] * s));
        CHECK(y[static_cast<std::size_t>(i + 2)] == doctest::Approx(x[static_cast<std::size_t>(i + 2)] * c + x[static_cast<std::size_t>(i)] * s));
    }
    // q·k depends on the positions' difference only.
    const auto dot_at = [&](std::int64_t shift) {
        const Tensor rq = rope.apply(q, shift), rk = rope.apply(k, shift);
        return ops::sum(rq.select(1, 2) * rk.select(1, 0)).item();
    };
    CHECK(dot_at(0) == doctest::Approx(dot_at(5)));
    // Explicit positions, one row for the batch or one per batch row.
    const Tensor positions = Tensor::from(std::vector<std::int32_t>{4, 5, 6}, {3});
    check_near(rope.apply(q, positions).values(), rope.apply(q, 4).values());
    check_near(rope.apply(q, Tensor::from(std::vector<std::int32_t>{4, 5, 6}, {1, 3})).values(), rope.apply(q, 4).values());
    // Heads before time ([B, H, T, D], as attention's products take them): the same rotation, said so.
    const Tensor heads_first = q.transpose(1, 2);
    check_near(module.apply(heads_first, Layout::heads_time, 2).transpose(1, 2).values(), rope.apply(q, 2).values());
    check_near(module.apply(heads_first, Layout::heads_time, positions).transpose(1, 2).values(),
                rope.apply(q, 4).values());
    // Read in the other layout it is another rotation: the layout is the caller's to say.
    const std::vector<double> wrong = module.apply(heads_first, Layout::time_heads, 2).transpose(1, 2).values();
    const std::vector<double> right = rope.apply(q, 2).values();
    double apart = 0;
    for (std::size_t i = 0; i < right.size(); ++i) apart = std::max(apart, std::abs(wrong[i] - right[i]));
    CHECK(apart > 0.1);
    CHECK_THROWS_WITH_AS(nn::RotaryEmbedding(5), doctest::Contains("the head size must be even, got 5"), Error);
}

TEST_CASE("attention: the packed route equals the written-out one; masks; grouped-query heads") {
    const std::int64_t dim = 8, heads = 2;
    nn::Attention attn(dim, heads, {.rope_theta = 10000});
    attn.initialize(3);
    attn.to(Device::cpu(), DType::f64);
    const Tensor x = random_tensor({2, 5, dim}, 4);
    // An all-true mask takes the written-out route; the result is the packed kernel's.
    const Tensor everywhere = Tensor::full({5, 5}, 1, DType::boolean);
    check_near(attn(x).values(), attn.forward(x, everywhere).values(), 1e-10);
    // A mask that hides every key but the first: each position sees position 0 only.
    const Tensor first = ops::arange(5).unsqueeze(0) == 0.0;
    const Tensor only_first = attn.forward(x, first.expand({5, 5}));
    const Tensor v0 = (*attn.v_proj)(x).narrow(1, 0, 1);
    check_near(only_first.values(), attn.o_proj(v0.expand({2, 5, dim})).values(), 1e-10);
    // Not causal: the last position's output is the same whoever comes after.
    nn::Attention both_ways(dim, heads, {.kv_heads = 1, .causal = false});
    both_ways.initialize(4);
    CHECK(both_ways.k_proj->weight.shape() == Shape{4, dim});  // one key-value head of 4
    CHECK_THROWS_WITH_AS(nn::Attention(dim, 3, {.kv_heads = 2, .head_dim = 4}),
                         doctest::Contains("Attention: 3 query heads do not share 2 key-value heads evenly"), Error);
}

TEST_CASE("a Llama-style block of these modules: every parameter's gradient against finite differences (f64)") {
    for (const auto& [kv_heads, bias] : {std::pair<std::int64_t, bool>{1, true}, {2, false}}) {
        OpsBlock block(8, 2, kv_heads, bias);
        const Tensor x = random_tensor({2, 4, 8}, 11, 0.5);
        const auto report = nn::check_parameter_gradients(block, [&] { return block(x); });
        INFO(report.str());
        CHECK(report.passed);
        // And with respect to the input.
        Tensor leaf = x.clone().requires_grad_();
        const auto input = nn::check_gradients([&] { return block(leaf); }, {leaf});
        INFO(input.str());
        CHECK(input.passed);
    }
}

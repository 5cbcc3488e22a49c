// Elementwise ops: NumPy broadcasting, scalars, masks, integers, the in-place
// forms and their rules, and bad input. (Gradients: the op list's check.)
#include "levers/core/autograd.hpp"
#include "levers/nn/nn.hpp"
#include "tests/gradcheck.hpp"

#include <cmath>
#include <limits>

using namespace levers;
using namespace levers::testing;

namespace {
Tensor vec(std::vector<double> v, Shape s) { return Tensor::from(v, s); }
}  // namespace

TEST_CASE("add and its gradients, and the in-place sum models use at a fork") {
    // (Was the residual kernel's test: the add of two equal shapes, now the broadcasting op.)
    Rng rng(5);
    auto a = random_vector(10, rng), b = random_vector(10, rng), r = random_vector(10, rng);
    auto loss = [&] {
        autograd::InferenceMode plain;
        return ops::sum(ops::add(vec(a, {10}), vec(b, {10})) * vec(r, {10})).item();
    };
    Tensor ta = vec(a, {10}).requires_grad_(), tb = vec(b, {10}).requires_grad_();
    ops::sum((ta + tb) * vec(r, {10})).backward();
    const auto da = ta.grad().values(), db = tb.grad().values();
    check_gradient("d_a", a.data(), da.data(), a.size(), loss);
    check_gradient("d_b", b.data(), db.data(), b.size(), loss);
    // In place (out aliasing a), under InferenceMode.
    const Tensor x = vec(a, {10});
    {
        autograd::InferenceMode inference;
        ops::add_(x, vec(b, {10}));
    }
    for (int i = 0; i < 10; ++i) CHECK(x.values()[static_cast<std::size_t>(i)] == a[static_cast<std::size_t>(i)] + b[static_cast<std::size_t>(i)]);
}

TEST_CASE("broadcasting follows NumPy: trailing dimensions aligned, sizes equal or 1") {
    const Tensor a = vec({1, 2, 3}, {3});
    const Tensor b = vec({10, 20}, {2, 1});
    const Tensor sum = a + b;
    CHECK(sum.shape() == Shape{2, 3});
    CHECK(sum.values() == std::vector<double>{11, 12, 13, 21, 22, 23});
    CHECK((b - a).values() == std::vector<double>{9, 8, 7, 19, 18, 17});
    CHECK((a * b).shape() == Shape{2, 3});
    const Tensor scalar = Tensor::full({}, 2, DType::f64);  // a 0-d tensor broadcasts anywhere
    CHECK((a / scalar).values() == std::vector<double>{0.5, 1, 1.5});
    CHECK(ops::maximum(a, vec({2}, {1})).values() == std::vector<double>{2, 2, 3});
    CHECK(ops::pow(a, vec({2, 0.5, 1}, {3})).values() == std::vector<double>{1, std::sqrt(2.0), 3});
    // Gradients sum back over the broadcast dimensions.
    Tensor ga = vec({1, 2, 3}, {3}).requires_grad_(), gb = vec({10, 20}, {2, 1}).requires_grad_();
    ops::sum(ga * gb).backward();
    CHECK(ga.grad().values() == std::vector<double>{30, 30, 30});
    CHECK(gb.grad().values() == std::vector<double>{6, 6});
}

TEST_CASE("scalars, operators, unary maths and masks") {
    const Tensor x = vec({-2, -0.5, 0, 1.5}, {4});
    CHECK((x * 0.5).values() == std::vector<double>{-1, -0.25, 0, 0.75});
    CHECK((1.0 - x).values() == std::vector<double>{3, 1.5, 1, -0.5});
    CHECK((x + 1.0).values() == std::vector<double>{-1, 0.5, 1, 2.5});
    CHECK((-x).values() == std::vector<double>{2, 0.5, -0, -1.5});
    CHECK(ops::relu(x).values() == std::vector<double>{0, 0, 0, 1.5});
    CHECK(ops::abs(x).values() == std::vector<double>{2, 0.5, 0, 1.5});
    CHECK(ops::sign(x).values() == std::vector<double>{-1, -1, 0, 1});
    CHECK(ops::clamp(x, -1, 1).values() == std::vector<double>{-1, -0.5, 0, 1});
    CHECK(ops::leaky_relu(x, 0.1).values()[0] == doctest::Approx(-0.2));
    CHECK(ops::sigmoid(x).values()[2] == 0.5);
    CHECK(ops::silu(x).values()[3] == doctest::Approx(1.5 / (1 + std::exp(-1.5))));
    CHECK(ops::gelu_erf(x).values()[3] == doctest::Approx(0.5 * 1.5 * (1 + std::erf(1.5 / std::sqrt(2.0)))));
    CHECK(ops::gelu(x, ops::GeluForm::erf).values() == ops::gelu_erf(x).values());
    CHECK(ops::softplus(vec({1000, -1000}, {2})).values() == std::vector<double>{1000, 0});  // no overflow
    CHECK(ops::rsqrt(vec({4}, {1})).item() == 0.5);
    CHECK(ops::log1p(vec({0}, {1})).item() == 0);
    // Comparisons make bool masks; masks combine and select.
    const Tensor m = x > 0.0;
    CHECK(m.dtype() == DType::boolean);
    CHECK(m.values() == std::vector<double>{0, 0, 0, 1});
    CHECK(((x < -1.0) | m).values() == std::vector<double>{1, 0, 0, 1});
    CHECK((~m).values() == std::vector<double>{1, 1, 1, 0});
    CHECK((x == x).values() == std::vector<double>{1, 1, 1, 1});
    CHECK(ops::where(m, x, 9.0).values() == std::vector<double>{9, 9, 9, 1.5});
    CHECK(ops::masked_fill(x, x < 0.0, 0.0).values() == std::vector<double>{0, 0, 0, 1.5});
    // NaN wins maximum and minimum, as in PyTorch.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    CHECK(std::isnan(ops::maximum(vec({nan}, {1}), vec({1}, {1})).item()));
}

TEST_CASE("integers compute as integers; float-only ops and fractional scalars are refused for them") {
    const Tensor ids = Tensor::from(std::vector<std::int32_t>{3, -1, 7}, {3});
    CHECK((ids + Tensor::from(std::vector<std::int32_t>{1, 1, 1}, {3})).values() == std::vector<double>{4, 0, 8});
    CHECK((ids * 2.0).dtype() == DType::i32);
    CHECK(ops::abs(ids).values() == std::vector<double>{3, 1, 7});
    CHECK((ids == 7.0).values() == std::vector<double>{0, 0, 1});
    CHECK_THROWS_WITH_AS(ids * 0.5, doctest::Contains("mul: the scalar 0.5 is not a whole number, and the tensor is i32"), Error);
    CHECK_THROWS_WITH_AS(ops::exp(ids), doctest::Contains("exp: 'x' is i32 [3] on cpu, expected f32, f64 or bf16"), Error);
}

TEST_CASE("in-place forms: for InferenceMode, exact about aliasing, refused on recorded tensors") {
    Tensor w = vec({1, 2, 3, 4}, {2, 2});
    {
        autograd::InferenceMode inference;
        w *= 2.0;
        w -= vec({1, 1}, {2});  // a row broadcast over the matrix
        ops::clamp_(w, 0, 5);
        ops::masked_fill_(w, w > 4.0, -1.0);
        ops::exp_(w.narrow(1, 0, 1));  // a strided view, in place
    }
    CHECK(w.values()[1] == 3);
    CHECK(w.values()[3] == -1);
    CHECK(w.values()[0] == doctest::Approx(std::exp(1.0)));
    // x += xᵀ reads xᵀ whole before writing x (the operand overlaps the output).
    Tensor s = vec({1, 2, 3, 4}, {2, 2});
    {
        autograd::InferenceMode inference;
        s += s.mT();
    }
    CHECK(s.values() == std::vector<double>{2, 5, 5, 8});
    Tensor leaf = vec({1, 2}, {2}).requires_grad_();
    CHECK_THROWS_WITH_AS(ops::add_(leaf, 1.0), doctest::Contains("in-place ops are for code under autograd::InferenceMode"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::add_(Tensor::zeros({2}, DType::f64), vec({1, 2, 3}, {3})),
                         doctest::Contains("does not broadcast"), Error);
}

TEST_CASE("bad input names the op, the arguments and their shapes") {
    const Tensor a = Tensor::zeros({2, 3}, DType::f32);
    CHECK_THROWS_WITH_AS(a + Tensor::zeros({4}, DType::f32),
                         doctest::Contains("add: 'b' is f32 [4] on cpu, but 'a' is [2, 3]: they do not broadcast"), Error);
    CHECK_THROWS_WITH_AS(a * Tensor::zeros({2, 3}, DType::f64),
                         doctest::Contains("mul: 'a' is f32 [2, 3] on cpu and 'b' is f64 [2, 3] on cpu"), Error);
    CHECK_THROWS_WITH_AS(ops::where(a > 0.0, a, Tensor::zeros({5}, DType::f32)),
                         doctest::Contains("where: shapes [2, 3] and [5] do not broadcast"), Error);
    CHECK_THROWS_WITH_AS(ops::where(a, a, a), doctest::Contains("where: 'mask' is f32 [2, 3] on cpu, expected bool"), Error);
    CHECK_THROWS_WITH_AS(ops::clamp(a, 1, 0), doctest::Contains("clamp: the lower bound 1 is above the upper bound 0"), Error);
}

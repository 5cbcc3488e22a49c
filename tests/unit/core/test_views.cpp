// Strided tensors: views share memory and cost nothing, gradients flow back
// through each kind, copies honour strides and dtypes, and bad arguments name
// the method, the argument and the shape.
#include "levers/core/autograd.hpp"
#include "examples/user_project/user_ops.hpp"
#include "levers/core/function.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace levers;

namespace {
// 0, 1, 2, ... in a tensor of `shape`.
Tensor iota(Shape shape, DType dtype = DType::f64) {
    std::vector<double> v(static_cast<std::size_t>(shape.numel()));
    std::iota(v.begin(), v.end(), 0.0);
    return Tensor::from(v, shape).to(Device::cpu(), dtype);
}
}  // namespace

TEST_CASE("views: strides, shared memory, and no copy") {
    const Tensor x = iota({2, 3, 4});
    CHECK(x.is_contiguous());
    CHECK(x.stride(0) == 12);
    CHECK(x.stride(-1) == 1);

    const Tensor t = x.transpose(0, 2);  // [4, 3, 2]
    CHECK(t.shape() == Shape{4, 3, 2});
    CHECK(t.raw() == x.raw());
    CHECK(!t.is_contiguous());
    CHECK(t.values() == std::vector<double>{0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21,
                                            2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23});
    CHECK(x.permute({1, 2, 0}).shape() == Shape{3, 4, 2});
    CHECK(x.mT().shape() == Shape{2, 4, 3});

    const Tensor n = x.narrow(2, 1, 2);  // columns 1 and 2
    CHECK(n.values() == std::vector<double>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
    CHECK(x.slice(2, 0, 4, 3).values() == std::vector<double>{0, 3, 4, 7, 8, 11, 12, 15, 16, 19, 20, 23});
    CHECK(x.slice(1, -1, 3).values() == std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23});
    CHECK(x.select(1, 2).shape() == Shape{2, 4});
    CHECK(x.select(-1, -1).values() == std::vector<double>{3, 7, 11, 15, 19, 23});

    const Tensor row = iota({3});
    const Tensor e = row.expand({2, 3});
    CHECK(e.stride(0) == 0);
    CHECK(e.values() == std::vector<double>{0, 1, 2, 0, 1, 2});
    CHECK(row.unsqueeze(0).expand({4, -1}).shape() == Shape{4, 3});
    CHECK(row.unsqueeze(1).shape() == Shape{3, 1});
    CHECK(iota({1, 3, 1}).squeeze().shape() == Shape{3});
    CHECK(iota({1, 3, 1}).squeeze(0).shape() == Shape{3, 1});
    CHECK(iota({2, 3}).squeeze(0).shape() == Shape{2, 3});  // not of size 1: stays

    CHECK(x.flatten(1).shape() == Shape{2, 12});
    CHECK(x.flatten().shape() == Shape{24});
    CHECK(x.unflatten(2, {2, -1}).shape() == Shape{2, 3, 2, 2});
    CHECK(x.reshape({4, -1}).raw() == x.raw());  // contiguous: a view
    // A transposed tensor cannot be viewed flat; reshape copies it.
    CHECK_THROWS_WITH_AS(t.view({24}), doctest::Contains("strides that do not allow [24]"), Error);
    const Tensor flat = t.reshape({24});
    CHECK(flat.raw() != x.raw());
    CHECK(flat.values() == t.values());
    // Dimensions a reshape splits or merges stay a view where memory allows.
    const Tensor swapped = x.transpose(0, 1);  // [3, 2, 4]
    CHECK(swapped.reshape({3, 2, 2, 2}).raw() == x.raw());
    CHECK(swapped.reshape({3, 8}).raw() != x.raw());
    const Tensor c = t.contiguous();
    CHECK(c.is_contiguous());
    CHECK(c.values() == t.values());
    CHECK(c.contiguous().raw() == c.raw());  // already contiguous: itself
}

TEST_CASE("views: writes land in the viewed memory; copy_ converts, broadcasts and honours strides") {
    const Tensor x = Tensor::zeros({3, 4}, DType::f32);
    x.narrow(1, 1, 2).fill_(5);
    CHECK(x.values() == std::vector<double>{0, 5, 5, 0, 0, 5, 5, 0, 0, 5, 5, 0});
    x.mT().select(0, 3).copy_(Tensor::from(std::vector<double>{1, 2, 3}, {3}));  // f64 into an f32 column
    CHECK(x.values() == std::vector<double>{0, 5, 5, 1, 0, 5, 5, 2, 0, 5, 5, 3});
    x.select(0, 0).copy_(Tensor::full({1}, 7, DType::f32));  // broadcast
    CHECK(x.select(0, 0).values() == std::vector<double>{7, 7, 7, 7});
    x.slice(1, 0, 4, 2).zero();
    CHECK(x.values() == std::vector<double>{0, 7, 0, 7, 0, 5, 0, 2, 0, 5, 0, 3});
    // Masks and integers convert too.
    const Tensor m = Tensor::from(std::vector<bool>{true, false, true}, {3});
    CHECK(m.to(DType::f32).values() == std::vector<double>{1, 0, 1});
    CHECK(Tensor::from(std::vector<double>{0, -2.5, 3}, {3}).to(DType::boolean).values() ==
          std::vector<double>{0, 1, 1});
    CHECK(Tensor::from(std::vector<double>{1.7, -2.5}, {2}).to(DType::i32).values() == std::vector<double>{1, -2});
    CHECK_THROWS_WITH_AS(x.copy_(Tensor::zeros({2, 4}, DType::f32)), doctest::Contains("does not broadcast"), Error);
}

TEST_CASE("views: gradients flow back through every kind of view") {
    Tensor x = iota({2, 3, 4}).requires_grad_();
    // Each element of x reaches the loss through a different view; the weights tell them apart.
    const Tensor a = ops::sum(x.transpose(0, 2) * iota({4, 3, 2}));       // permute
    const Tensor b = ops::sum(x.narrow(1, 1, 1) * 100.0);                 // slice
    const Tensor c = ops::sum(x.select(2, 3) * 1000.0);                   // select
    const Tensor d = ops::sum(x.reshape({6, 4}).slice(0, 0, 6, 5) * 1e4);  // reshape, a stepped slice
    const Tensor e = ops::sum(x.select(0, 1).select(0, 0).expand({5, 4}));  // expand: 5 copies
    (a + b + c + d + e).backward();
    const std::vector<double> g = x.grad().values();
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k) {
                double want = (k * 3 + j) * 2 + i;  // a: x[i, j, k] met iota at [k, j, i]
                if (j == 1) want += 100;
                if (k == 3) want += 1000;
                const int row = i * 3 + j;
                if (row == 0 || row == 5) want += 1e4;
                if (i == 1 && j == 0) want += 5;
                CAPTURE(i);
                CAPTURE(j);
                CAPTURE(k);
                CHECK(g[static_cast<std::size_t>((i * 3 + j) * 4 + k)] == want);
            }
}

TEST_CASE("views: a strided leaf gets a contiguous gradient of its own shape") {
    const Tensor base = iota({4, 3});
    Tensor leaf = base.mT();  // [3, 4], not contiguous
    leaf.requires_grad_();
    ops::sum(leaf * iota({3, 4})).backward();
    CHECK(leaf.grad().shape() == Shape{3, 4});
    CHECK(leaf.grad().is_contiguous());
    CHECK(leaf.grad().values() == iota({3, 4}).values());
}

TEST_CASE("views: bad dimensions and shapes name the method, the argument and the shape") {
    const Tensor x = iota({2, 3});
    CHECK_THROWS_WITH_AS(x.transpose(0, 2), doctest::Contains("transpose: dimension 2 does not exist in a tensor of 2 dimensions (valid: -2 to 1)"), Error);
    CHECK_THROWS_WITH_AS(x.narrow(1, 2, 2), doctest::Contains("narrow: 2 elements from 2 do not fit dimension 1 of shape [2, 3]"), Error);
    CHECK_THROWS_WITH_AS(x.select(0, 2), doctest::Contains("select: index 2 is out of range for dimension 0 of shape [2, 3]"), Error);
    CHECK_THROWS_WITH_AS(x.expand({4, 3, 2}), doctest::Contains("expand: dimension 0 of shape [2, 3] is 2, which cannot expand to 3"), Error);
    CHECK_THROWS_WITH_AS(x.permute({0, 0}), doctest::Contains("permute: dimension 0 appears twice"), Error);
    CHECK_THROWS_WITH_AS(x.reshape({4, -1}), doctest::Contains("reshape: a tensor of shape [2, 3] cannot be seen with sizes of product 4"), Error);
    CHECK_THROWS_WITH_AS(x.reshape({-1, -1}), doctest::Contains("only one size may be -1"), Error);
    CHECK_THROWS_WITH_AS(x.slice(1, 0, 2, 0), doctest::Contains("slice: step must be at least 1"), Error);
}

TEST_CASE("a view of a view of a view is still the same memory") {
    const Tensor x = iota({4, 6, 8});
    const Tensor v = x.transpose(0, 1).narrow(2, 2, 4).unsqueeze(0).expand({3, 6, 4, 4}).select(0, 1).flatten(0, 0);
    CHECK(v.shape() == Shape{6, 4, 4});
    const auto* base = static_cast<const double*>(x.raw());
    CHECK(v.data<double>() == base + 2);  // the first element of the narrowed columns
}

namespace {
// Two tensor arguments, the second frozen: backward skips it.
struct WeightedSum : autograd::Function<WeightedSum> {
    static Tensor forward(autograd::Context& ctx, const Tensor& a, const Tensor& w) {
        ctx.save(a, w);
        return ops::sum(a * w);
    }
    static std::vector<Tensor> backward(const autograd::Context& ctx, const Tensor& grad) {
        return {ctx.saved(1) * grad, ctx.needs_grad(1) ? ctx.saved(0) * grad : Tensor()};
    }
};
struct WrongShape : autograd::Function<WrongShape> {
    static constexpr const char* kName = "wrong_shape";
    static Tensor forward(autograd::Context&, const Tensor& x) { return x * 2.0; }
    static std::vector<Tensor> backward(const autograd::Context&, const Tensor& grad) { return {ops::sum(grad)}; }
};
}  // namespace

TEST_CASE("functions users define: forward and backward with tensors, checked against finite differences") {
    Tensor x = Tensor::from(std::vector<double>{-1.5, -0.2, 0.3, 2.0}, {2, 2}).requires_grad_();
    const auto report = nn::check_gradients([&] { return user::ScaledTanh::apply(x, 3.0); }, {x});
    INFO(report.str());
    CHECK(report.passed);
    // Recorded as one node of its own.
    const Tensor y = user::ScaledTanh::apply(x, 3.0);
    CHECK(y.requires_grad());
    CHECK(autograd::tape().nodes() >= 1);

    Tensor a = Tensor::from(std::vector<double>{1, 2, 3}, {3}).requires_grad_();
    const Tensor w = Tensor::from(std::vector<double>{4, 5, 6}, {3});
    WeightedSum::apply(a, w).backward();
    CHECK(a.grad().values() == std::vector<double>{4, 5, 6});
    CHECK(!w.grad().defined());

    CHECK_THROWS_WITH_AS(WrongShape::apply(x).backward(Tensor::full({2, 2}, 1, DType::f64)),
                         doctest::Contains("wrong_shape: backward returned a [] gradient for argument 0 of shape [2, 2]"),
                         Error);
}

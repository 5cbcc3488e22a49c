// Matrix products, convolutions and pooling against plain loops, on every
// layout and option; indexing and building; bad shapes named.
#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>

using namespace levers;

namespace {
Tensor random_input(Shape shape, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<double> v(static_cast<std::size_t>(shape.numel()));
    for (double& x : v) x = rng.normal();
    return Tensor::from(v, shape);
}
double at(const Tensor& t, std::initializer_list<std::int64_t> index) {
    std::int64_t offset = 0;
    int d = 0;
    for (const std::int64_t i : index) offset += i * t.stride(d++);
    return t.data<double>()[offset];
}
void check_close(const std::vector<double>& got, const std::vector<double>& want, double epsilon = 1e-12) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(epsilon));
}
}  // namespace

TEST_CASE("matmul: batches broadcast, transposed views, vectors, against loops") {
    const Tensor a = random_input({2, 1, 3, 4}, 1), b = random_input({5, 4, 2}, 2);
    const Tensor y = ops::matmul(a, b);
    REQUIRE(y.shape() == Shape{2, 5, 3, 2});
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 5; ++j)
            for (int m = 0; m < 3; ++m)
                for (int n = 0; n < 2; ++n) {
                    double s = 0;
                    for (int k = 0; k < 4; ++k) s += at(a, {i, 0, m, k}) * at(b, {j, k, n});
                    want.push_back(s);
                }
    check_close(y.values(), want);
    // Transposed operands as they lie, against their contiguous copies.
    const Tensor at_ = random_input({4, 3}, 3).mT(), bt = random_input({2, 4}, 4).mT();
    check_close(ops::matmul(at_, bt).values(), ops::matmul(at_.contiguous(), bt.contiguous()).values());
    // Vectors: a row on the left, a column on the right, both a dot product.
    const Tensor v = random_input({4}, 5), m = random_input({4, 3}, 6);
    CHECK(ops::matmul(v, m).shape() == Shape{3});
    CHECK(ops::matmul(m.mT(), v).shape() == Shape{3});
    CHECK(ops::matmul(v, v).shape() == Shape{});
    CHECK(ops::matmul(v, v).item() == doctest::Approx(ops::sum(v * v).item()));
    // An expanded operand (repeated rows) is copied before the product.
    const Tensor rows = random_input({1, 4}, 7).expand({3, 4});
    check_close(ops::matmul(rows, m).values(), ops::matmul(rows.contiguous(), m).values());
    CHECK_THROWS_WITH_AS(ops::matmul(random_input({2, 3}, 1), random_input({4, 2}, 2)),
                         doctest::Contains("matmul: 'a' [2, 3] and 'b' [4, 2] do not multiply: 3 columns against 4 rows"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::matmul(random_input({2, 2, 3}, 1), random_input({3, 3, 2}, 2)),
                         doctest::Contains("matmul: shapes [2] and [3] do not broadcast"), Error);
}

TEST_CASE("conv2d: stride, padding, dilation and groups against a direct convolution") {
    const std::int64_t n = 2, c = 4, h = 7, w = 6, o = 6, groups = 2, kh = 3, kw = 2;
    const Tensor x = random_input({n, c, h, w}, 11), weight = random_input({o, c / groups, kh, kw}, 12), bias = random_input({o}, 13);
    const ops::Pair stride{2, 1}, padding{1, 1}, dilation{2, 1};
    const Tensor y = ops::conv2d(x, weight, bias, stride, padding, dilation, groups);
    const std::int64_t oh = (h + 2 * 1 - 2 * (kh - 1) - 1) / 2 + 1, ow = (w + 2 - 1 * (kw - 1) - 1) / 1 + 1;
    REQUIRE(y.shape() == Shape{n, o, oh, ow});
    std::vector<double> want;
    for (int b = 0; b < n; ++b)
        for (int f = 0; f < o; ++f)
            for (int yy = 0; yy < oh; ++yy)
                for (int xx = 0; xx < ow; ++xx) {
                    double s = at(bias, {f});
                    const int g = f / (o / groups);
                    for (int ch = 0; ch < c / groups; ++ch)
                        for (int i = 0; i < kh; ++i)
                            for (int j = 0; j < kw; ++j) {
                                const std::int64_t iy = yy * 2 - 1 + i * 2, ix = xx - 1 + j;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                                s += at(x, {b, g * (c / groups) + ch, iy, ix}) * at(weight, {f, ch, i, j});
                            }
                    want.push_back(s);
                }
    check_close(y.values(), want);
    // One image [C, H, W] works too.
    CHECK(ops::conv2d(x.select(0, 1), weight, bias, stride, padding, dilation, groups).shape() == Shape{o, oh, ow});
    CHECK_THROWS_WITH_AS(ops::conv2d(x, random_input({6, 3, 3, 3}, 1), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2),
                         doctest::Contains("conv2d: 'x' has 4 channels and 'weight' is [6, 3, 3, 3]: with 2 groups it needs [O, 2, kh, kw]"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::conv2d(x, random_input({2, 4, 9, 2}, 1)),
                         doctest::Contains("conv2d: a 9x2 window (dilation 1x1) does not fit a 7x6 image with padding 0x0"), Error);
}

TEST_CASE("pooling: the max (padding counts as -infinity) and the mean of each window") {
    const Tensor x = Tensor::from(std::vector<double>{-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 1, 3, 3});
    // 2x2 windows, stride 2, padding 1: every window holds padding, which must never win.
    CHECK(ops::max_pool2d(x, {2, 2}, {2, 2}, {1, 1}).values() == std::vector<double>{-1, -2, -4, -5});
    CHECK(ops::max_pool2d(x, {2, 2}, {1, 1}).values() == std::vector<double>{-1, -2, -4, -5});
    CHECK(ops::avg_pool2d(x, {3, 3}).values() == std::vector<double>{-5});
    // Padding counts in the mean (count_include_pad).
    CHECK(ops::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}).values() == std::vector<double>{-0.25, -1.25, -2.75, -7});
}

namespace {
// conv2d composed as the GPU computes it: unfold, one batched matmul, the bias added.
Tensor conv_by_columns(const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Pair stride, ops::Pair padding,
                       ops::Pair dilation, std::int64_t groups) {
    const std::int64_t n = x.dim(0), o = weight.dim(0), field = weight.dim(1) * weight.dim(2) * weight.dim(3);
    const Tensor cols = ops::unfold(x, {weight.dim(2), weight.dim(3)}, dilation, padding, stride);
    const std::int64_t oh = (x.dim(2) + 2 * padding[0] - dilation[0] * (weight.dim(2) - 1) - 1) / stride[0] + 1;
    const Tensor y = ops::matmul(weight.reshape({groups, o / groups, field}), cols.view({n, groups, field, -1}))
                         .reshape({n, o, oh, -1});
    return bias.defined() ? y + bias.view({1, o, 1, 1}) : y;
}
std::vector<double> grad_of(const Tensor& t) { return t.grad().defined() ? t.grad().values() : std::vector<double>{}; }
}  // namespace

TEST_CASE("conv2d's fused CPU kernels equal unfold and matmul, values and gradients, on every path") {
    struct Geometry {
        const char* name;
        Shape x, weight;
        ops::Pair stride, padding, dilation;
        std::int64_t groups;
    };
    // The same-size runs (3x3 padded, dilated), a 1x1 window (the image as its columns),
    // the general walk (stride, groups), and more images than the backward's 16 chunks.
    const Geometry cases[] = {
        {"3x3, padding 1", {3, 2, 7, 6}, {4, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
        {"3x3, dilation 2, padding 2", {2, 3, 6, 7}, {2, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},
        {"1x1, groups 2", {2, 4, 3, 5}, {6, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 2},
        {"3x2, stride 2x1, groups 2", {2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 1}, {1, 1}, 2},
        {"19 images, 5x5 padding 2", {19, 1, 6, 6}, {3, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1},
    };
    // f32 as the models run (the AVX-512 runs), f64 to the last digits.
    for (const auto& [dtype, epsilon] : {std::pair{DType::f64, 1e-12}, std::pair{DType::f32, 1e-4}})
    for (const Geometry& c : cases) {
        CAPTURE(std::string(c.name));
        CAPTURE(std::string(name_of(dtype)));
        for (const bool with_bias : {true, false})
            for (const bool x_grad : {true, false}) {
                const auto inputs = [&] {
                    return std::array<Tensor, 3>{
                        random_input(c.x, 21).to(dtype).requires_grad_(x_grad), random_input(c.weight, 22).to(dtype).requires_grad_(),
                        with_bias ? random_input({c.weight[0]}, 23).to(dtype).requires_grad_() : Tensor()};
                };
                const auto fused = inputs(), composed = inputs();
                const Tensor probe = random_input(ops::conv2d(fused[0], fused[1], fused[2], c.stride, c.padding, c.dilation,
                                                        c.groups).shape(), 24).to(dtype);
                const Tensor y = ops::conv2d(fused[0], fused[1], fused[2], c.stride, c.padding, c.dilation, c.groups);
                const Tensor want =
                    conv_by_columns(composed[0], composed[1], composed[2], c.stride, c.padding, c.dilation, c.groups);
                check_close(y.values(), want.values(), epsilon);
                ops::sum(y * probe).backward();
                ops::sum(want * probe).backward();
                for (std::size_t k = 0; k < 3; ++k) {
                    if (!fused[k].defined()) continue;
                    CAPTURE(k);
                    CHECK(fused[k].grad().defined() == composed[k].grad().defined());
                    check_close(grad_of(fused[k]), grad_of(composed[k]), epsilon);
                }
            }
    }
}

TEST_CASE("max_pool2d's fused CPU kernels equal the largest of unfolded columns: ties, NaN, padding, gradients") {
    // Small integers: ties in most windows (ReLU's zeros are the usual ones); a NaN wins its window.
    // 8 lines: 2x2 windows tile the image (backward writes each pixel once); 7: the last line in no window.
    // 38 columns: 19 windows a line, a full vector of 16 (AVX-512) or two of 8 (AVX2) and a tail.
    struct Window {
        ops::Pair kernel, stride, padding, dilation;
    };
    const Window windows[] = {{{2, 2}, {2, 2}, {0, 0}, {1, 1}}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
                              {{2, 3}, {1, 2}, {1, 1}, {2, 1}}};
    for (const std::int64_t lines : {8, 7})
    for (const DType dtype : {DType::f64, DType::f32})
    for (const Window& w : windows) {
        CAPTURE(lines);
        CAPTURE(w.kernel[0]);
        CAPTURE(w.stride[1]);
        CAPTURE(std::string(name_of(dtype)));
        const Shape shape{2, 3, lines, 38};
        Rng rng(5);
        std::vector<double> v(static_cast<std::size_t>(shape.numel()));
        for (double& e : v) e = std::floor(rng.uniform() * 4) - 1;
        v[9] = std::numeric_limits<double>::quiet_NaN();
        const Tensor x = Tensor::from(v, shape).to(dtype).requires_grad_();
        const Tensor x2 = Tensor::from(v, shape).to(dtype).requires_grad_();
        const Tensor y = ops::max_pool2d(x, w.kernel, w.stride, w.padding, w.dilation);
        const Tensor cols = ops::unfold(x2.reshape({6, 1, lines, 38}), w.kernel, w.dilation, w.padding, w.stride,
                                        -std::numeric_limits<double>::infinity());
        const Tensor want = ops::max(cols, 1).values.view(y.shape());
        const std::vector<double> got = y.values(), expected = want.values();
        REQUIRE(got.size() == expected.size());
        for (std::size_t i = 0; i < got.size(); ++i)
            CHECK((std::isnan(expected[i]) ? std::isnan(got[i]) : got[i] == expected[i]));
        const Tensor probe = random_input(y.shape(), 7).to(dtype);
        ops::sum(y * probe).backward();
        ops::sum(want * probe).backward();
        // The same winner in every window (where windows overlap, a pixel's terms are added in another order).
        check_close(x.grad().values(), x2.grad().values(), dtype == DType::f64 ? 1e-12 : 1e-5);
        if (w.stride == w.kernel) CHECK(x.grad().values() == x2.grad().values());
    }
}

TEST_CASE("indexing and building: gather, scatter_add, index_select, cat, one_hot, triangles, repeats") {
    const Tensor x = Tensor::from(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor idx = Tensor::from(std::vector<std::int32_t>{2, 0, -1, 1}, {2, 2});
    CHECK(ops::gather(x, 1, idx).values() == std::vector<double>{3, 1, 6, 5});
    CHECK(ops::index_select(x, 1, Tensor::from(std::vector<std::int32_t>{2, 2, 0}, {3})).values() ==
          std::vector<double>{3, 3, 1, 6, 6, 4});
    const Tensor added = ops::scatter_add(Tensor::zeros({2, 3}, DType::f64), 1,
                                          Tensor::from(std::vector<std::int32_t>{0, 0, 2, 1}, {2, 2}),
                                          Tensor::from(std::vector<double>{1, 2, 3, 4}, {2, 2}));
    CHECK(added.values() == std::vector<double>{3, 0, 0, 0, 4, 3});
    CHECK(ops::cat({x, x.narrow(1, 0, 1)}, 1).values() == std::vector<double>{1, 2, 3, 1, 4, 5, 6, 4});
    CHECK(ops::stack({x, x}, 1).shape() == Shape{2, 2, 3});
    CHECK(ops::split(x, 2, 1).size() == 2);
    CHECK(ops::chunk(x, 3, 1)[2].values() == std::vector<double>{3, 6});
    CHECK(ops::one_hot(Tensor::from(std::vector<std::int32_t>{2, 0}, {2}), 3).values() == std::vector<double>{0, 0, 1, 1, 0, 0});
    CHECK(ops::arange(3).values() == std::vector<double>{0, 1, 2});
    CHECK(ops::arange(1, 2, 0.25, DType::f64).values() == std::vector<double>{1, 1.25, 1.5, 1.75});
    const Tensor sq = Tensor::from(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
    CHECK(ops::triu(sq).values() == std::vector<double>{1, 2, 3, 0, 5, 6, 0, 0, 9});
    CHECK(ops::tril(sq, -1).values() == std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0});
    CHECK(ops::repeat(Tensor::from(std::vector<double>{1, 2}, {2}), {2, 2}).values() ==
          std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2});
    CHECK(ops::repeat_interleave(Tensor::from(std::vector<double>{1, 2}, {2}), 3, 0).values() ==
          std::vector<double>{1, 1, 1, 2, 2, 2});
    CHECK(ops::full_like(x, 7).values() == std::vector<double>(6, 7));
    CHECK_THROWS_WITH_AS(ops::gather(x, 1, Tensor::from(std::vector<std::int32_t>{3}, {1, 1})),
                         doctest::Contains("gather: index 3 (at element 0 of 'index') is out of range for a dimension of size 3 (valid: -3 to 2)"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::index_select(x, 0, Tensor::from(std::vector<std::int32_t>{-3}, {1})),
                         doctest::Contains("index_select: index -3"), Error);
    CHECK_THROWS_WITH_AS(ops::cat({x, Tensor::zeros({3, 3}, DType::f64)}, 1),
                         doctest::Contains("cat: tensors[1] is [3, 3], but tensors[0] is [2, 3]: only dimension 1 may differ"),
                         Error);
    CHECK_THROWS_WITH_AS(ops::one_hot(Tensor::from(std::vector<std::int32_t>{4}, {1}), 3),
                         doctest::Contains("one_hot: index 4"), Error);
}

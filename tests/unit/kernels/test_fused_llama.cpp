// The Llama family's fused kernels against their references, the same maths
// written from general ops: values and every gradient, in f64 (to rounding)
// and f32.
#include "framework/core/rng.hpp"
#include "kernels/chunked_cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/linear_cross_entropy.hpp"
#include "kernels/indexing.hpp"
#include "kernels/reduce.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

#include <doctest/doctest.h>

#include <functional>

using namespace levers;

namespace {

Tensor random(Shape shape, DType dtype, std::uint64_t seed, double offset = 0) {
    Rng rng(seed);
    std::vector<double> v(static_cast<std::size_t>(shape.numel()));
    for (double& x : v) x = offset + rng.normal();
    return Tensor::from(v, shape).to(Device::cpu(), dtype);
}

double worst_difference(const Tensor& a, const Tensor& b) {
    const auto x = a.values(), y = b.values();
    REQUIRE(x.size() == y.size());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / (1 + std::abs(y[i])));
    return worst;
}

// f(inputs) fused and reference, the same probe on both outputs: values and each input's gradient agree.
void check_same(const std::vector<Tensor>& shapes_of, const std::function<Tensor(const std::vector<Tensor>&)>& fused,
                const std::function<Tensor(const std::vector<Tensor>&)>& reference, double tolerance) {
    const auto run = [&](const std::function<Tensor(const std::vector<Tensor>&)>& f) {
        std::vector<Tensor> in;
        for (const Tensor& t : shapes_of) in.push_back(t.detach().requires_grad_());
        const Tensor out = f(in);
        const Tensor probe = random(out.shape(), out.dtype(), 99);
        ops::sum(out * probe).backward();
        std::vector<Tensor> result = {out.detach()};
        for (const Tensor& t : in) result.push_back(t.grad());
        return result;
    };
    const auto a = run(fused), b = run(reference);
    for (std::size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);  // 0: the output, then each input's gradient
        CHECK(worst_difference(a[i], b[i]) <= tolerance);
    }
}

}  // namespace

TEST_CASE("rmsnorm, rope and swiglu equal the same maths written from general ops, values and gradients") {
    for (const auto& [dtype, tolerance] : {std::pair{DType::f64, 1e-12}, std::pair{DType::f32, 1e-5}}) {
        CAPTURE(name_of(dtype));
        check_same({random({3, 5, 16}, dtype, 1), random({16}, dtype, 2, 1.0)},
                   [](const auto& in) { return ops::rmsnorm(in[0], in[1], 1e-6); },
                   [](const auto& in) { return in[0] * ops::rsqrt(ops::mean(ops::square(in[0]), {-1}, true) + 1e-6) * in[1]; },
                   tolerance);
        check_same({random({4, 24}, dtype, 3), random({4, 24}, dtype, 4)},
                   [](const auto& in) { return ops::swiglu(in[0], in[1]); },
                   [](const auto& in) { return ops::silu(in[0]) * in[1]; }, tolerance);
        // Rotary tables of 7 positions for heads of 8, per batch row or shared.
        const Tensor angle = random({2, 7, 4}, dtype, 5);
        for (const bool per_row : {false, true}) {
            CAPTURE(per_row);
            const Tensor a = per_row ? ops::cat({angle, angle}, -1) : ops::cat({angle, angle}, -1).select(0, 0);
            const Tensor cos = ops::cos(a), sin = ops::sin(a);
            check_same({random({2, 7, 3, 8}, dtype, 6)}, [&](const auto& in) { return ops::rope(in[0], cos, sin); },
                       [&](const auto& in) {
                           const Tensor x = in[0];
                           const Tensor rotated = ops::cat({ops::neg(x.narrow(-1, 4, 4)), x.narrow(-1, 0, 4)}, -1);
                           return x * cos.unsqueeze(-2) + rotated * sin.unsqueeze(-2);
                       },
                       tolerance);
        }
    }
}

TEST_CASE("the chunked head-and-loss equals linear_cross_entropy: loss and gradients, any chunk size, ignored rows") {
    for (const auto& [dtype, tolerance] : {std::pair{DType::f64, 1e-12}, std::pair{DType::f32, 1e-5}}) {
        CAPTURE(name_of(dtype));
        std::vector<std::int32_t> ids(2 * 9);
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7 + 3) % 37);
        ids[4] = ids[5] = ids[6] = -100;  // ignored, a whole chunk of them at chunk size 3
        const Tensor targets = Tensor::from(ids, {2, 9});
        for (const std::int64_t chunk : {1, 3, 4, 18, 0}) {
            CAPTURE(chunk);
            check_same({random({2, 9, 12}, dtype, 7), random({37, 12}, dtype, 8)},
                       [&](const auto& in) { return ops::chunked_linear_cross_entropy(in[0], in[1], targets, -100, chunk); },
                       [&](const auto& in) { return ops::linear_cross_entropy(in[0], in[1], targets); }, tolerance);
        }
    }
    const Tensor none = Tensor::from(std::vector<std::int32_t>(4, -100), {4});
    CHECK_THROWS_WITH_AS(ops::chunked_linear_cross_entropy(random({4, 3}, DType::f32, 1), random({5, 3}, DType::f32, 2), none),
                         doctest::Contains("every target is ignore_index"), Error);
}

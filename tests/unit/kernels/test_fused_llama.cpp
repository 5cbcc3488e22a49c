// The Llama family's fused kernels against their references, the same maths
// written from general ops: values and every gradient, in f64 (to rounding)
// and f32.
#include "levers/core/rng.hpp"
#include "levers/kernels/causal_attention.hpp"
#include "levers/kernels/chunked_cross_entropy.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/linear_cross_entropy.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/rmsnorm.hpp"
#include "levers/kernels/rope.hpp"

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

namespace {
// i32 [rows, T] of each query's first reachable key, from document lengths per row.
Tensor starts_of(const std::vector<std::vector<std::int32_t>>& lengths) {
    std::vector<std::int32_t> s;
    for (const auto& row : lengths) {
        std::int32_t at = 0;
        for (const std::int32_t n : row) {
            for (std::int32_t i = 0; i < n; ++i) s.push_back(at);
            at += n;
        }
    }
    return Tensor::from(s, {static_cast<std::int64_t>(lengths.size()), static_cast<std::int64_t>(s.size() / lengths.size())});
}
}  // namespace

TEST_CASE("fused causal attention equals the written-out form: grouped heads, packed documents, windows, a cache's prefix") {
    struct Case {
        const char* what;
        std::int64_t batch, time, keys, heads, kv_heads, head_dim, window;
        Tensor starts;
    };
    const std::vector<Case> cases = {
        {"one head per key-value head, two tiles", 2, 70, 70, 2, 2, 8, 0, {}},
        {"grouped-query heads, three tiles", 2, 130, 130, 4, 2, 16, 0, {}},
        {"packed documents", 2, 130, 130, 4, 2, 16, 0, starts_of({{50, 40, 40}, {3, 127}})},
        {"a sliding window", 1, 100, 100, 4, 1, 8, 17, {}},
        {"a window over packed documents", 2, 130, 130, 2, 1, 8, 33, starts_of({{70, 60}, {1, 1, 128}})},
        {"the last queries of a longer prefix (a KV cache)", 2, 5, 75, 4, 2, 8, 0, {}},
        {"one query per row, grouped heads (a decoding step)", 3, 1, 40, 6, 2, 8, 0, {}},
        {"a decoding step past left padding, in a window", 2, 1, 50, 4, 1, 8, 20,
         Tensor::from(std::vector<std::int32_t>{7, 0}, {2, 1})},
        {"head size 64", 1, 40, 40, 2, 1, 64, 0, {}},
        {"head size 128", 1, 40, 40, 2, 2, 128, 0, {}},
    };
    for (const auto& [dtype, tolerance] : {std::pair{DType::f64, 1e-12}, std::pair{DType::f32, 1e-5}}) {
        for (const Case& c : cases) {
            CAPTURE(name_of(dtype));
            const std::string what = c.what;
            CAPTURE(what);
            const ops::CausalMask mask{.starts = c.starts, .window = c.window};
            // k and v are the first `keys` positions of longer tensors, as a cache's are: rows lie apart.
            const auto prefix = [&](const Tensor& t) { return t.narrow(1, 0, c.keys); };
            check_same({random({c.batch, c.time, c.heads, c.head_dim}, dtype, 11),
                        random({c.batch, c.keys + 3, c.kv_heads, c.head_dim}, dtype, 12),
                        random({c.batch, c.keys + 3, c.kv_heads, c.head_dim}, dtype, 13)},
                       [&](const auto& in) { return ops::causal_attention(in[0], prefix(in[1]), prefix(in[2]), mask); },
                       [&](const auto& in) {
                           return ops::attention_written_out(in[0], prefix(in[1]), prefix(in[2]), mask);
                       },
                       tolerance);
        }
    }
}

TEST_CASE("fused causal attention refuses what it cannot compute, naming it") {
    const Tensor q = random({1, 4, 4, 8}, DType::f32, 1), k = random({1, 4, 2, 8}, DType::f32, 2);
    CHECK_THROWS_WITH_AS(ops::causal_attention(q, random({1, 4, 3, 8}, DType::f32, 3), random({1, 4, 3, 8}, DType::f32, 3)),
                         doctest::Contains("4 query heads do not share 3 key-value heads"), Error);
    CHECK_THROWS_WITH_AS(ops::causal_attention(q, random({1, 3, 2, 8}, DType::f32, 3), random({1, 3, 2, 8}, DType::f32, 3)),
                         doctest::Contains("S >= 4"), Error);
    CHECK_THROWS_WITH_AS(ops::causal_attention(q, k, random({1, 4, 2, 4}, DType::f32, 3)),
                         doctest::Contains("'v'"), Error);
    const Tensor backwards = Tensor::from(std::vector<std::int32_t>{0, 1, 0, 0}, {1, 4});
    CHECK_THROWS_WITH_AS(ops::causal_attention(q, k, k, {.starts = backwards}),
                         doctest::Contains("must not decrease along a row"), Error);
    const Tensor ahead = Tensor::from(std::vector<std::int32_t>{0, 2, 2, 2}, {1, 4});
    CHECK_THROWS_WITH_AS(ops::causal_attention(q, k, k, {.starts = ahead}), doctest::Contains("within 0..1"), Error);
    CHECK_THROWS_WITH_AS(ops::causal_attention(q, k, k, {.window = -1}), doctest::Contains("window -1"), Error);
}

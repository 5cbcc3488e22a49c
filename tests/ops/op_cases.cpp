#include "tests/ops/op_cases.hpp"

#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"
#include "levers/kernels/causal_attention.hpp"
#include "levers/kernels/rmsnorm.hpp"
#include "levers/kernels/rope.hpp"

#include <cmath>

namespace levers::testing {

namespace {
using Kind = OpInput::Kind;
using Layout = OpInput::Layout;
using In = std::vector<Tensor>;
OpInput real(Shape s, double scale = 1.0) { return {s, Kind::real, 0, scale}; }
OpInput positive(Shape s) { return {s, Kind::positive}; }
OpInput unit(Shape s) { return {s, Kind::unit}; }
OpInput ids(Shape s, std::int64_t limit) { return {s, Kind::ids, limit}; }
// Rotation angles for x [B, T, H, D]: [T, D] (or [B, T, D] when per batch row), made of
// constants, not inputs (the tables of a rotary embedding take no gradient).
Tensor rope_angles(const Tensor& x, bool per_batch_row) {
    const auto range = [&](std::int64_t n) { return ops::arange(0, static_cast<double>(n), 1, x.dtype(), x.device()); };
    const Tensor angle = range(x.dim(1)).unsqueeze(1) * (range(x.dim(3)) * 0.1 + 0.3).unsqueeze(0);
    return per_batch_row ? angle + range(x.dim(0)).view({-1, 1, 1}) * 0.7 : angle;
}
// Packed rows for q [B, T, H, D]: two documents per row, the second from
// 5/12 of the way (the first key each query sees), as constants.
Tensor two_documents(const Tensor& q) {
    const std::int64_t split = q.dim(1) * 5 / 12;
    std::vector<std::int32_t> starts;
    for (std::int64_t b = 0; b < q.dim(0); ++b)
        for (std::int64_t t = 0; t < q.dim(1); ++t) starts.push_back(static_cast<std::int32_t>(t < split ? 0 : split));
    return Tensor::from(starts, {q.dim(0), q.dim(1)}).to(q.device());
}
OpInput targets(Shape s, std::int64_t limit) { return {s, Kind::targets, limit}; }
OpInput mask(Shape s) { return {s, Kind::mask}; }
// The same input as a view: the transpose of a contiguous tensor, or every other element.
OpInput transposed(OpInput i) { return i.layout = Layout::transposed, i; }
OpInput strided(OpInput i) { return i.layout = Layout::strided, i; }
// GPT-2 small's width and a batch of 4 x 256 tokens: the benchmark's shapes.
constexpr std::int64_t B = 4, T = 256, C = 768, V = 50257, N = B * T, H = 12, D = 64;
using Fn = std::function<Tensor(const In&)>;
OpCase op(std::string name, std::vector<OpInput> inputs, std::vector<OpInput> bench, Fn run, Fn reference = {},
          double bf16_tolerance = 5e-2) {
    return {std::move(name), std::move(inputs), std::move(bench), std::move(run), std::move(reference), bf16_tolerance};
}

// An elementwise op three ways: contiguous, on a view, broadcast.
void unary_cases(std::vector<OpCase>& out, const std::string& name, Fn run, bool positive_only = false) {
    const auto input = [&](Shape s) { return positive_only ? positive(s) : real(s); };
    out.push_back(op(name, {input({4, 6})}, {input({N, C})}, run));
    out.push_back(op(name + " (transposed)", {transposed(input({5, 3}))}, {transposed(input({C, N}))}, run));
}
void binary_cases(std::vector<OpCase>& out, const std::string& name, Fn run, bool positive_b = false,
                  bool positive_a = false) {
    const auto a = [&](Shape s) { return positive_a ? positive(s) : real(s); };
    const auto b = [&](Shape s) { return positive_b ? positive(s) : real(s); };
    out.push_back(op(name, {a({4, 6}), b({4, 6})}, {a({N, C}), b({N, C})}, run));
    out.push_back(op(name + " (broadcast)", {a({2, 3, 4}), b({3, 1})}, {a({B, T, C}), b({C})}, run));
    out.push_back(op(name + " (strided, transposed)", {strided(a({3, 5})), transposed(b({3, 5}))},
                     {strided(a({N, C})), transposed(b({N, C}))}, run));
}
}  // namespace

const std::vector<OpCase>& op_cases() {
    static const std::vector<OpCase> cases = [] {
        std::vector<OpCase> c = {
            // --- the fused ops of the GPT ------------------------------------------------------
            op("add", {real({4, 6}), real({4, 6})}, {real({N, C}), real({N, C})},
               [](const In& in) { return ops::add(in[0], in[1]); }),
            op("gelu", {real({5, 7})}, {real({N, 4 * C})}, [](const In& in) { return ops::gelu(in[0]); }),
            op("gelu (transposed)", {transposed(real({5, 7}))}, {transposed(real({4 * C, N}))},
               [](const In& in) { return ops::gelu(in[0]); }),
            op("linear", {real({6, 5}), real({4, 5}), real({4})}, {real({N, C}), real({3 * C, C}, 0.02), real({3 * C})},
               [](const In& in) { return ops::linear(in[0], in[1], in[2]); }),
            op("linear (no bias)", {real({2, 3, 5}), real({4, 5})}, {real({N, C}), real({C, C}, 0.02)},
               [](const In& in) { return ops::linear(in[0], in[1]); }),
            op("linear (strided input, transposed weight)", {strided(real({6, 5})), transposed(real({4, 5}))},
               {strided(real({N, C})), transposed(real({C, C}, 0.02))},
               [](const In& in) { return ops::linear(in[0], in[1]); }),
            op("linear_gelu", {real({6, 5}), real({8, 5}), real({8})},
               {real({N, C}), real({4 * C, C}, 0.02), real({4 * C})},
               [](const In& in) { return ops::linear_gelu(in[0], in[1], in[2]); }),
            op("gelu_mlp", {real({2, 3, 8}), real({32, 8}), real({32}), real({8, 32}), real({8})},
               {real({B, T, C}), real({4 * C, C}, 0.02), real({4 * C}), real({C, 4 * C}, 0.02), real({C})},
               [](const In& in) { return ops::gelu_mlp(in[0], in[1], in[2], in[3], in[4]); }),
            op("layernorm", {real({6, 10}), real({10}), real({10})}, {real({N, C}), real({C}), real({C})},
               [](const In& in) { return ops::layernorm(in[0], in[1], in[2]); }),
            op("layernorm (strided)", {strided(real({6, 10})), real({10}), real({10})},
               {strided(real({N, C})), real({C}), real({C})},
               [](const In& in) { return ops::layernorm(in[0], in[1], in[2]); }),
            op("rmsnorm", {real({6, 10}), real({10})}, {real({N, C}), real({C})},
               [](const In& in) { return ops::rmsnorm(in[0], in[1], 1e-5); }),
            op("rmsnorm (strided)", {strided(real({6, 10})), real({10})}, {strided(real({N, C})), real({C})},
               [](const In& in) { return ops::rmsnorm(in[0], in[1], 1e-5); }),
            op("rope", {real({2, 3, 2, 6})}, {real({B, T, 4, C / 4})},
               [](const In& in) {
                   const Tensor angle = rope_angles(in[0], false);
                   return ops::rope(in[0], ops::cos(angle), ops::sin(angle));
               }),
            op("rope (a table per batch row)", {real({2, 3, 2, 6})}, {real({B, T, 4, C / 4})},
               [](const In& in) {
                   const Tensor angle = rope_angles(in[0], true);
                   return ops::rope(in[0], ops::cos(angle), ops::sin(angle));
               }),
            op("attention", {real({2, 5, 24})}, {real({B, T, 3 * C})},
               [](const In& in) { return ops::attention(in[0], 2); }),
            op("flash_attention", {real({1, 80, 3 * 128})}, {real({B, T, 3 * C})},
               [](const In& in) { return ops::flash_attention(in[0], in[0].dim(2) / 3 / 64); },
               [](const In& in) { return ops::attention(in[0], in[0].dim(2) / 3 / 64); }),
            // Small for the finite differences, a head size the GPUs take; the
            // GPUs' tiles are crossed in tests/gpu (test_ops.cpp).
            op("causal_attention (grouped heads, packed documents)",
               {real({1, 24, 2, 64}), real({1, 24, 1, 64}), real({1, 24, 1, 64})},
               {real({B, T, 8, 64}), real({B, T, 2, 64}), real({B, T, 2, 64})},
               [](const In& in) { return ops::causal_attention(in[0], in[1], in[2], {.starts = two_documents(in[0])}); }),
            op("causal_attention (head size 128, a window)",
               {real({1, 20, 1, 128}), real({1, 20, 1, 128}), real({1, 20, 1, 128})},
               {real({B, T, 4, 128}), real({B, T, 4, 128}), real({B, T, 4, 128})},
               [](const In& in) { return ops::causal_attention(in[0], in[1], in[2], {.window = 7}); }),
            op("embedding", {ids({3, 4}, 11), real({11, 6})}, {ids({B, T}, V), real({V, C}, 0.02)},
               [](const In& in) { return ops::embedding(in[0], in[1]); }),
            op("embedding (token + position)", {ids({2, 5}, 9), real({9, 6}), real({7, 6})},
               {ids({B, T}, V), real({V, C}, 0.02), real({1024, C}, 0.02)},
               [](const In& in) { return ops::embedding(in[0], in[1], in[2]); }),
            op("cross_entropy", {real({6, 11}), targets({6}, 11)}, {real({N, V}), targets({N}, V)},
               [](const In& in) { return ops::cross_entropy(in[0], in[1]); }),
            op("linear_cross_entropy", {real({6, 8}), real({11, 8}), targets({6}, 11)},
               {real({N, C}), real({V, C}, 0.02), targets({N}, V)},
               [](const In& in) { return ops::linear_cross_entropy(in[0], in[1], in[2]); }),
            op("lora_linear", {real({5, 6}), real({4, 6}), real({4}), real({2, 6}), real({4, 2})},
               {real({N, C}), real({3 * C, C}, 0.02), real({3 * C}), real({8, C}, 0.02), real({3 * C, 8}, 0.02)},
               [](const In& in) { return ops::lora_linear(in[0], in[1], in[2], in[3], in[4], 2.0); }),
            op("dropout", {real({6, 7})}, {real({N, C})},
               [](const In& in) { return ops::dropout(in[0], 0.3, 0x5eedull); }),
        };

        // --- elementwise: every entry of levers/kernels/elementwise_math.hpp ----------------------------
#define LEVERS_CASE_UNARY(name, value, derivative) \
    unary_cases(c, #name, [](const In& in) { return ops::name(in[0]); }, positive_input(#name));
        const auto positive_input = [](const std::string& name) {
            return name == "log" || name == "log1p" || name == "sqrt" || name == "rsqrt" || name == "reciprocal";
        };
        LEVERS_UNARY_FLOAT_OPS(LEVERS_CASE_UNARY)
        LEVERS_UNARY_ANY_OPS(LEVERS_CASE_UNARY)
#undef LEVERS_CASE_UNARY
#define LEVERS_CASE_BINARY(name, value, d_a, d_b)                                                              \
    binary_cases(c, #name, [](const In& in) { return ops::name(in[0], in[1]); }, std::string(#name) == "div", \
                 std::string(#name) == "pow");
        LEVERS_BINARY_ANY_OPS(LEVERS_CASE_BINARY)
        LEVERS_BINARY_FLOAT_OPS(LEVERS_CASE_BINARY)
#undef LEVERS_CASE_BINARY
        const std::vector<OpCase> more = {
            op("scalars (x * 0.5 + 2, 3 - x, x / 4, 2 / x)", {positive({4, 5})}, {positive({N, C})},
               [](const In& in) {
                   const Tensor& x = in[0];
                   return (x * 0.5 + 2.0) * (3.0 - x) + x / 4.0 + 2.0 / x;
               }),
            op("pow (scalar exponent and base)", {positive({4, 5})}, {positive({N, C})},
               [](const In& in) { return ops::pow(in[0], 1.5) + ops::pow(2.0, in[0]); }),
            op("clamp", {real({4, 6})}, {real({N, C})}, [](const In& in) { return ops::clamp(in[0], -0.5, 0.7); }),
            op("leaky_relu", {real({4, 6})}, {real({N, C})}, [](const In& in) { return ops::leaky_relu(in[0], 0.1); }),
            op("smooth_l1", {real({4, 6})}, {real({N, C})}, [](const In& in) { return ops::smooth_l1(in[0], 0.5); }),
            op("where", {mask({3, 4}), real({3, 4}), real({4})}, {mask({N, C}), real({N, C}), real({C})},
               [](const In& in) { return ops::where(in[0], in[1], in[2]); }),
            op("masked_fill (a mask broadcast over rows)", {real({3, 4}), mask({4})}, {real({N, C}), mask({C})},
               [](const In& in) { return ops::masked_fill(in[0], in[1], -2.0); }),
            op("comparisons and masks, as a factor", {real({3, 4}), real({3, 4})}, {real({N, C}), real({N, C})},
               [](const In& in) {
                   const Tensor m = (in[0] > in[1]) | (in[0] <= -1.0);
                   return in[0] * m.to(in[0].dtype()) + in[1] * (~m).to(in[1].dtype());
               }),

            // --- views: autograd through each, then an op on the strided result -------------------
            op("views (transpose, narrow, select, expand, reshape)", {real({3, 4, 5})}, {real({B, T, C})},
               [](const In& in) {
                   const Tensor& x = in[0];
                   const Tensor t = x.transpose(0, 2).narrow(1, 1, 2);  // [5, 2, 3]
                   const Tensor s = x.select(1, 2).unsqueeze(1);        // [3, 1, 5]
                   return ops::exp(t).reshape({-1}) + ops::sum(s.expand({s.dim(0), x.dim(1), s.dim(2)}).slice(2, 0, s.dim(2), 2).flatten());
               }),
            op("permute and contiguous", {real({2, 3, 4})}, {real({B, T, C})},
               [](const In& in) { return in[0].permute({2, 0, 1}).contiguous() * 2.0; }),

            // --- reductions -------------------------------------------------------------------------
            op("sum (all)", {real({3, 4})}, {real({N, C})}, [](const In& in) { return ops::sum(in[0]); }),
            op("sum (dims, keepdim)", {real({2, 3, 4})}, {real({B, T, C})},
               [](const In& in) { return ops::sum(in[0], {0, 2}, true); }),
            op("sum (transposed rows)", {transposed(real({5, 4}))}, {transposed(real({C, N}))},
               [](const In& in) { return ops::sum(in[0], {-1}); }),
            op("mean", {real({2, 3, 4})}, {real({B, T, C})}, [](const In& in) { return ops::mean(in[0], {1}); }),
            op("amax and amin", {real({3, 5})}, {real({N, C})},
               [](const In& in) { return ops::amax(in[0], {1}) + ops::sum(ops::amin(in[0], {0})); }),
            op("max along a dimension", {real({3, 5})}, {real({N, C})},
               [](const In& in) { return ops::max(in[0], 0).values * 2.0 + ops::sum(ops::min(in[0], 1).values); }),
            op("var and std_dev", {real({4, 6})}, {real({N, C})},
               [](const In& in) { return ops::var(in[0], {1}) + ops::sum(ops::std_dev(in[0], {0}, 0)); }),
            op("norm (p = 2, 1, 3)", {real({4, 6})}, {real({N, C})},
               [](const In& in) {
                   return ops::norm(in[0], 2, {1}) + ops::norm(in[0], 1, {1}) + ops::norm(in[0], 3, {1});
               }),
            op("logsumexp", {real({4, 6})}, {real({N, C})}, [](const In& in) { return ops::logsumexp(in[0], {1}); }),
            op("softmax (last dimension)", {real({4, 6})}, {real({B * H, T, T})},
               [](const In& in) { return ops::softmax(in[0], -1); }),
            op("softmax (first dimension)", {real({300, 3})}, {real({T, N})},  // rows of 300: the GPU's wide blocks
               [](const In& in) { return ops::softmax(in[0], 0); }),
            op("log_softmax", {real({4, 6})}, {real({N, V})}, [](const In& in) { return ops::log_softmax(in[0], -1); }),

            // --- matrix products --------------------------------------------------------------------
            op("matmul", {real({3, 4}), real({4, 5})}, {real({N, C}), real({C, C}, 0.02)},
               [](const In& in) { return ops::matmul(in[0], in[1]); }),
            op("matmul (batched, broadcast)", {real({2, 3, 4, 5}), real({3, 5, 2})},
               {real({B, H, T, D}), real({H, D, T})}, [](const In& in) { return ops::matmul(in[0], in[1]); }),
            op("matmul (transposed views)", {transposed(real({4, 3})), transposed(real({2, 3, 4}))},
               {transposed(real({T, C})), transposed(real({B, C, T}))},
               [](const In& in) { return ops::matmul(in[0].unsqueeze(0), in[1]); }),
            op("matmul (vector cases)", {real({4}), real({4, 3}), real({3})}, {real({C}), real({C, C}), real({C})},
               [](const In& in) { return ops::matmul(ops::matmul(in[0], in[1]), in[2]); }),

            // --- building and indexing ------------------------------------------------------------
            op("gather", {real({3, 5}), ids({3, 4}, 5)}, {real({N, C}), ids({N, 1}, C)},
               [](const In& in) { return ops::gather(in[0], 1, in[1]); }),
            op("scatter_add", {real({3, 5}), ids({3, 4}, 5), real({3, 4})}, {real({N, C}), ids({N, 64}, C), real({N, 64})},
               [](const In& in) { return ops::scatter_add(in[0], 1, in[1], in[2]); }),
            op("index_select", {real({5, 3}), ids({4}, 5)}, {real({V, C}), ids({N}, V)},
               [](const In& in) { return ops::index_select(in[0], 0, in[1]); }),
            op("cat and stack", {real({2, 3}), real({2, 2}), real({2, 5})}, {real({N, C}), real({N, C}), real({N, 2 * C})},
               [](const In& in) {
                   const Tensor joined = ops::cat({in[0], in[1]}, 1);
                   return ops::stack({joined, in[2]}, 0) * 1.5;
               }),
            op("split and chunk", {real({6, 4})}, {real({3 * T, C})},
               [](const In& in) {
                   const Tensor& x = in[0];
                   const auto thirds = ops::chunk(x, 3, 0);  // [rows / 3, cols] each
                   const auto halves = ops::split(x, x.dim(1) / 2, 1);
                   const std::int64_t third = x.dim(0) / 3;
                   return thirds[0] * thirds[2] + ops::cat({halves[1].narrow(0, 0, third), halves[0].narrow(0, third, third)}, 1);
               }),
            op("triu and tril", {real({2, 4, 4})}, {real({B * H, T, T})},
               [](const In& in) { return ops::triu(in[0], 1) + ops::tril(in[0], -1) * 2.0; }),
            op("repeat and repeat_interleave", {real({2, 3})}, {real({T, C})},
               [](const In& in) {
                   return ops::repeat(in[0], {2, 2}) + ops::repeat_interleave(ops::repeat_interleave(in[0], 2, 0), 2, 1);
               }),
            op("one_hot times a table", {ids({4}, 6), real({6, 3})}, {ids({N}, V), real({V, 8})},
               [](const In& in) { return ops::matmul(ops::one_hot(in[0], in[1].dim(0), in[1].dtype()), in[1]); }),

            // --- convolutions and pooling ---------------------------------------------------------
            op("conv2d", {real({2, 3, 6, 5}), real({4, 3, 3, 3}), real({4})},
               {real({32, 64, 32, 32}), real({64, 64, 3, 3}, 0.05), real({64})},
               [](const In& in) { return ops::conv2d(in[0], in[1], in[2], {1, 1}, {1, 1}); }),
            op("conv2d (stride 2, dilation 2, groups 2)", {real({2, 4, 9, 8}), real({6, 2, 3, 2})},
               {real({32, 64, 32, 32}), real({64, 32, 3, 3}, 0.05)},
               [](const In& in) { return ops::conv2d(in[0], in[1], Tensor(), {2, 2}, {1, 0}, {2, 2}, 2); }),
            op("conv2d (1x1)", {real({2, 4, 3, 5}), real({3, 4, 1, 1}), real({3})},
               {real({32, 64, 32, 32}), real({64, 64, 1, 1}, 0.1), real({64})},
               [](const In& in) { return ops::conv2d(in[0], in[1], in[2]); }),
            op("conv2d (3x3, dilation 2, same size)", {real({2, 2, 6, 7}), real({3, 2, 3, 3})},
               {real({32, 64, 32, 32}), real({64, 64, 3, 3}, 0.05)},
               [](const In& in) { return ops::conv2d(in[0], in[1], Tensor(), {1, 1}, {2, 2}, {2, 2}); }),
            op("max_pool2d", {real({2, 3, 6, 6})}, {real({32, 64, 32, 32})},
               [](const In& in) { return ops::max_pool2d(in[0], {2, 2}); }),
            op("max_pool2d (3x3, stride 2, padding 1)", {real({1, 2, 7, 6})}, {real({32, 64, 32, 32})},
               [](const In& in) { return ops::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}); }),
            op("avg_pool2d", {real({2, 3, 6, 4})}, {real({32, 64, 32, 32})},
               [](const In& in) { return ops::avg_pool2d(in[0], {2, 2}, {2, 2}, {1, 1}); }),
            op("unfold and fold", {real({2, 3, 5, 4})}, {real({32, 64, 32, 32})},
               [](const In& in) {
                   const Tensor cols = ops::unfold(in[0], {2, 3}, {1, 1}, {1, 1}, {1, 1});
                   return ops::fold(cols * 2.0, {in[0].dim(2), in[0].dim(3)}, {2, 3}, {1, 1}, {1, 1}, {1, 1});
               }),

            // --- losses -----------------------------------------------------------------------------
            op("mse_loss", {real({4, 5}), real({4, 5})}, {real({N, C}), real({N, C})},
               [](const In& in) { return ops::mse_loss(in[0], in[1]); }),
            op("l1_loss", {real({4, 5}), real({4, 5})}, {real({N, C}), real({N, C})},
               [](const In& in) { return ops::l1_loss(in[0], in[1], ops::Reduction::sum); }),
            op("smooth_l1_loss", {real({4, 5}), real({4, 5})}, {real({N, C}), real({N, C})},
               [](const In& in) { return ops::smooth_l1_loss(in[0], in[1], 0.5, ops::Reduction::none); }),
            op("binary_cross_entropy_with_logits", {real({4, 5}), unit({4, 5}), positive({5})},
               {real({N, C}), unit({N, C}), positive({C})},
               [](const In& in) {
                   return ops::binary_cross_entropy_with_logits(in[0], in[1], {.pos_weight = in[2]});
               }),
            op("nll_loss (class weights)", {real({5, 4}), targets({5}, 4), positive({4})},
               {real({N, V}), targets({N}, V), positive({V})},
               [](const In& in) { return ops::nll_loss(ops::log_softmax(in[0], -1), in[1], {.weight = in[2]}); }),
            op("cross_entropy (label smoothing, class weights)", {real({5, 4}), targets({5}, 4), positive({4})},
               {real({N, V}), targets({N}, V), positive({V})},
               [](const In& in) {
                   return ops::cross_entropy(in[0], in[1], ops::CrossEntropyOptions{.weight = in[2], .label_smoothing = 0.1});
               }),
            op("cross_entropy (label smoothing)", {real({5, 4}), targets({5}, 4)}, {real({N, V}), targets({N}, V)},
               [](const In& in) {
                   return ops::cross_entropy(in[0], in[1], ops::CrossEntropyOptions{.label_smoothing = 0.2});
               }),
        };
        c.insert(c.end(), more.begin(), more.end());
        return c;
    }();
    return cases;
}

std::vector<Tensor> make_inputs(const std::vector<OpInput>& specs, DType dtype, Device device, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<Tensor> out;
    for (const OpInput& s : specs) {
        // Values for the memory the input lies in: its transpose, or twice as wide.
        Shape stored = s.shape;
        const int nd = s.shape.ndim();
        if (s.layout == Layout::transposed && nd >= 2)
            stored = s.shape.with_dim(nd - 2, s.shape[nd - 1]).with_dim(nd - 1, s.shape[nd - 2]);
        if (s.layout == Layout::strided && nd >= 1) stored = s.shape.with_dim(nd - 1, 2 * s.shape[nd - 1]);
        const auto n = static_cast<std::size_t>(stored.numel());
        Tensor t;
        if (s.kind == Kind::real || s.kind == Kind::positive || s.kind == Kind::unit) {
            std::vector<double> v(n);
            for (double& x : v) {
                if (s.kind == Kind::real) x = rng.normal() * s.scale;
                if (s.kind == Kind::positive) x = std::abs(rng.normal()) * s.scale + 0.5;
                if (s.kind == Kind::unit) x = 0.05 + 0.9 * rng.uniform();
            }
            t = Tensor::from(v, stored).to(device, dtype);
        } else if (s.kind == Kind::mask) {
            std::vector<bool> v(n);
            for (std::size_t i = 0; i < n; ++i) v[i] = rng.uniform() < 0.5;
            t = Tensor::from(v, stored).to(device);
        } else {
            std::vector<std::int32_t> v(n);
            for (auto& x : v) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.limit)));
            if (s.kind == Kind::targets && n > 1) v[1] = -100;  // one ignored row
            t = Tensor::from(v, stored).to(device);
        }
        if (s.layout == Layout::transposed && nd >= 2) t = t.mT();
        if (s.layout == Layout::strided && nd >= 1) t = t.slice(nd - 1, 0, stored[nd - 1], 2);
        out.push_back(t);
    }
    return out;
}

double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
    LEVERS_CHECK(a.size() == b.size(), "relative_error of {} values against {}", a.size(), b.size());
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff += (a[i] - b[i]) * (a[i] - b[i]);
        norm += b[i] * b[i];
    }
    return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

}  // namespace levers::testing

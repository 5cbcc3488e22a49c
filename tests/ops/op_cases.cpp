#include "tests/ops/op_cases.hpp"

#include "framework/core/rng.hpp"
#include "framework/nn/nn.hpp"

#include <cmath>

namespace levers::testing {

namespace {
using Kind = OpInput::Kind;
OpInput real(Shape s, double scale = 1.0) { return {s, Kind::real, 0, scale}; }
OpInput ids(Shape s, std::int64_t limit) { return {s, Kind::ids, limit}; }
OpInput targets(Shape s, std::int64_t limit) { return {s, Kind::targets, limit}; }
// GPT-2 small's width and a batch of 4 x 256 tokens: the benchmark's shapes.
constexpr std::int64_t B = 4, T = 256, C = 768, V = 50257, N = B * T;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
OpCase op(std::string name, std::vector<OpInput> inputs, std::vector<OpInput> bench, Fn run, Fn reference = {}) {
    return {std::move(name), std::move(inputs), std::move(bench), std::move(run), std::move(reference), 5e-2};
}
}  // namespace

const std::vector<OpCase>& op_cases() {
    static const std::vector<OpCase> cases = {
        op("add", {real({4, 6}), real({4, 6})}, {real({N, C}), real({N, C})},
         [](const std::vector<Tensor>& in) { return ops::add(in[0], in[1]); }),
        op("gelu", {real({5, 7})}, {real({N, 4 * C})}, [](const std::vector<Tensor>& in) { return ops::gelu(in[0]); }),
        op("linear", {real({6, 5}), real({4, 5}), real({4})}, {real({N, C}), real({3 * C, C}, 0.02), real({3 * C})},
         [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); }),
        op("linear (no bias)", {real({2, 3, 5}), real({4, 5})}, {real({N, C}), real({C, C}, 0.02)},
         [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); }),
        op("linear_gelu", {real({6, 5}), real({8, 5}), real({8})}, {real({N, C}), real({4 * C, C}, 0.02), real({4 * C})},
         [](const std::vector<Tensor>& in) { return ops::linear_gelu(in[0], in[1], in[2]); }),
        op("gelu_mlp",
         {real({2, 3, 8}), real({32, 8}), real({32}), real({8, 32}), real({8})},
         {real({B, T, C}), real({4 * C, C}, 0.02), real({4 * C}), real({C, 4 * C}, 0.02), real({C})},
         [](const std::vector<Tensor>& in) { return ops::gelu_mlp(in[0], in[1], in[2], in[3], in[4]); }),
        op("layernorm", {real({6, 10}), real({10}), real({10})}, {real({N, C}), real({C}), real({C})},
         [](const std::vector<Tensor>& in) { return ops::layernorm(in[0], in[1], in[2]); }),
        op("attention", {real({2, 5, 24})}, {real({B, T, 3 * C})},
         [](const std::vector<Tensor>& in) { return ops::attention(in[0], 2); }),
        op("flash_attention", {real({1, 80, 3 * 128})}, {real({B, T, 3 * C})},
         [](const std::vector<Tensor>& in) { return ops::flash_attention(in[0], in[0].dim(2) / 3 / 64); },
         [](const std::vector<Tensor>& in) { return ops::attention(in[0], in[0].dim(2) / 3 / 64); }),
        op("embedding", {ids({3, 4}, 11), real({11, 6})}, {ids({B, T}, V), real({V, C}, 0.02)},
         [](const std::vector<Tensor>& in) { return ops::embedding(in[0], in[1]); }),
        op("embedding (token + position)", {ids({2, 5}, 9), real({9, 6}), real({7, 6})},
         {ids({B, T}, V), real({V, C}, 0.02), real({1024, C}, 0.02)},
         [](const std::vector<Tensor>& in) { return ops::embedding(in[0], in[1], in[2]); }),
        op("cross_entropy", {real({6, 11}), targets({6}, 11)}, {real({N, V}), targets({N}, V)},
         [](const std::vector<Tensor>& in) { return ops::cross_entropy(in[0], in[1]); }),
        op("linear_cross_entropy", {real({6, 8}), real({11, 8}), targets({6}, 11)},
         {real({N, C}), real({V, C}, 0.02), targets({N}, V)},
         [](const std::vector<Tensor>& in) { return ops::linear_cross_entropy(in[0], in[1], in[2]); }),
        op("lora_linear",
         {real({5, 6}), real({4, 6}), real({4}), real({2, 6}), real({4, 2})},
         {real({N, C}), real({3 * C, C}, 0.02), real({3 * C}), real({8, C}, 0.02), real({3 * C, 8}, 0.02)},
         [](const std::vector<Tensor>& in) { return ops::lora_linear(in[0], in[1], in[2], in[3], in[4], 2.0); }),
        op("dropout", {real({6, 7})}, {real({N, C})},
         [](const std::vector<Tensor>& in) { return ops::dropout(in[0], 0.3, 0x5eedull); }),
    };
    return cases;
}

std::vector<Tensor> make_inputs(const std::vector<OpInput>& specs, DType dtype, Device device, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<Tensor> out;
    for (const OpInput& s : specs) {
        const auto n = static_cast<std::size_t>(s.shape.numel());
        if (s.kind == Kind::real) {
            std::vector<double> v(n);
            for (double& x : v) x = rng.normal() * s.scale;
            out.push_back(Tensor::from(v, s.shape).to(device, dtype));
        } else {
            std::vector<std::int32_t> v(n);
            for (auto& x : v) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.limit)));
            if (s.kind == Kind::targets && n > 1) v[1] = -100;  // one ignored row
            out.push_back(Tensor::from(v, s.shape).to(device));
        }
    }
    return out;
}

double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff += (a[i] - b[i]) * (a[i] - b[i]);
        norm += b[i] * b[i];
    }
    return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

}  // namespace levers::testing

// Every op of the op list (tests/ops/op_cases.cpp) on the GPU against the
// CPU: outputs and every input's gradient, in f32 (to 1e-5) and bf16 (to the
// case's tolerance, inputs rounded to bf16 on both sides). Skipped, and
// counted as skipped, where no GPU is present.
#include "levers/core/autograd.hpp"
#include "levers/core/dispatch.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/rng.hpp"
#include "levers/kernels/causal_attention.hpp"
#include "tests/gpu/no_gpu.hpp"
#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::testing;

namespace {

// Runs `fn` on `in` (reals made leaves), backward with `upstream`; returns the
// output and each real input's gradient as doubles.
std::vector<std::vector<double>> run_case(const OpCase& c, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                          std::vector<Tensor> in, const std::vector<double>& upstream) {
    for (std::size_t k = 0; k < in.size(); ++k)
        if (c.inputs[k].differentiable()) in[k].requires_grad_();
    const Tensor out = fn(in);
    out.backward(Tensor::from(upstream, out.shape()).to(out.device(), out.dtype()));
    std::vector<std::vector<double>> got{out.values()};
    for (std::size_t k = 0; k < in.size(); ++k)
        if (c.inputs[k].differentiable()) got.push_back(in[k].grad().values());
    return got;
}
}  // namespace

TEST_CASE("every op on the GPU matches the CPU: outputs and gradients, f32 and bf16" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    for (const OpCase& c : op_cases()) {
        for (const DType dtype : {DType::f32, DType::bf16}) {
            // The same values, laid out alike, on both sides: rounded to bf16 on the host
            // too where the GPU computes in it (written back into the host's views).
            std::vector<Tensor> host = make_inputs(c.inputs, DType::f32, Device::cpu(), 3);
            const std::vector<Tensor> gpu = make_inputs(c.inputs, dtype, Device::cuda(0), 3);
            for (std::size_t k = 0; k < host.size(); ++k)
                if (c.inputs[k].differentiable() && dtype != DType::f32) host[k].copy_(host[k].to(dtype));
            std::vector<Tensor> probe = gpu;
            Shape out_shape;
            try {
                autograd::InferenceMode shape_only;
                out_shape = c.run(probe).shape();
            } catch (const MissingKernel& e) {
                MESSAGE(c.name << " in " << std::string(name_of(dtype)) << ": " << e.message());
                continue;
            }
            std::vector<double> upstream(static_cast<std::size_t>(out_shape.numel()));
            Rng rng(11);
            for (double& g : upstream) g = static_cast<float>(rng.normal());
            const auto want = run_case(c, c.cpu_reference ? c.cpu_reference : c.run, host, upstream);
            const auto got = run_case(c, c.run, gpu, upstream);
            REQUIRE(got.size() == want.size());
            const double tolerance = dtype == DType::f32 ? 1e-5 : c.bf16_tolerance;
            for (std::size_t i = 0; i < got.size(); ++i) {
                INFO(c.name << " in " << std::string(name_of(dtype)) << (i == 0 ? std::string(": output") : ": gradient of input " + std::to_string(i)));
                CHECK(relative_error(got[i], want[i]) <= tolerance);
            }
        }
    }
}

// The op list's attention cases are small (finite differences run them); here
// the GPU's tiles are crossed: several query and key tiles, documents and
// windows that skip whole tiles, a cache's longer prefix, both head sizes.
TEST_CASE("fused causal attention on the GPU matches the CPU across tiles, documents, windows and a cache's prefix" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    struct Case {
        const char* what;
        std::int64_t batch, time, keys, heads, kv_heads, head_dim, window;
        std::vector<std::int32_t> document_lengths;  // per row, the same for each row; empty: one document
    };
    const std::vector<Case> cases = {
        {"grouped heads, four tiles", 2, 200, 200, 4, 2, 64, 0, {}},
        {"packed documents that skip whole tiles", 2, 300, 300, 4, 1, 64, 0, {70, 1, 150, 79}},
        {"a window of 100 keys", 1, 260, 260, 2, 2, 128, 100, {}},
        {"the last queries of a longer prefix", 2, 3, 150, 4, 2, 128, 0, {}},
        {"a prompt after a prefix", 1, 70, 190, 2, 1, 64, 0, {}},
    };
    for (const Case& c : cases) {
        const std::string what = c.what;
        CAPTURE(what);
        std::vector<std::int32_t> starts;
        for (std::int64_t b = 0; b < c.batch && !c.document_lengths.empty(); ++b) {
            std::int32_t at = 0;
            for (const std::int32_t n : c.document_lengths) {
                for (std::int32_t i = 0; i < n; ++i) starts.push_back(at);
                at += n;
            }
        }
        std::vector<Tensor> host, gpu;
        for (const auto& [shape, seed] : {std::pair{Shape{c.batch, c.time, c.heads, c.head_dim}, 1},
                                          std::pair{Shape{c.batch, c.keys, c.kv_heads, c.head_dim}, 2},
                                          std::pair{Shape{c.batch, c.keys, c.kv_heads, c.head_dim}, 3}}) {
            const Tensor x = make_inputs({OpInput{shape}}, DType::bf16, Device::cpu(), static_cast<std::uint64_t>(seed))[0];
            host.push_back(x.to(Device::cpu(), DType::f32).requires_grad_());
            gpu.push_back(x.to(Device::cuda(0)).requires_grad_());
        }
        const auto mask = [&](Device d) {
            return ops::CausalMask{.starts = starts.empty() ? Tensor() : Tensor::from(starts, {c.batch, c.time}).to(d),
                                   .window = c.window};
        };
        const Tensor want = ops::causal_attention(host[0], host[1], host[2], mask(Device::cpu()));
        const Tensor got = ops::causal_attention(gpu[0], gpu[1], gpu[2], mask(Device::cuda(0)));
        std::vector<double> upstream(static_cast<std::size_t>(want.numel()));
        Rng rng(7);
        for (double& g : upstream) g = static_cast<float>(rng.normal());
        want.backward(Tensor::from(upstream, want.shape()).to(Device::cpu(), DType::f32));
        got.backward(Tensor::from(upstream, got.shape()).to(Device::cuda(0), DType::bf16));
        CHECK(relative_error(got.values(), want.values()) <= 2e-2);
        for (std::size_t k = 0; k < 3; ++k) {
            CAPTURE(k);  // the gradient of q, k, v
            CHECK(relative_error(gpu[k].grad().values(), host[k].grad().values()) <= 5e-2);
        }
    }
}

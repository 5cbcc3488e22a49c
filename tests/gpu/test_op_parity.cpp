// Every op of the op list (tests/ops/op_cases.cpp) on the card against the
// CPU: outputs and every input's gradient, in f32 (to 1e-5) and bf16 (to the
// case's tolerance, inputs rounded to bf16 on both sides). Skipped, and
// counted as skipped, where no card is present.
#include "framework/core/autograd.hpp"
#include "framework/core/dispatch.hpp"
#include "framework/core/gpu.hpp"
#include "framework/core/rng.hpp"
#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::testing;

namespace {
const bool kNoGpu = gpu_count() == 0;

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

TEST_CASE("every op on the card matches the CPU: outputs and gradients, f32 and bf16" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    for (const OpCase& c : op_cases()) {
        for (const DType dtype : {DType::f32, DType::bf16}) {
            // The same values, laid out alike, on both sides: rounded to bf16 on the host
            // too where the card computes in it (written back into the host's views).
            std::vector<Tensor> host = make_inputs(c.inputs, DType::f32, Device::cpu(), 3);
            const std::vector<Tensor> card = make_inputs(c.inputs, dtype, Device::cuda(0), 3);
            for (std::size_t k = 0; k < host.size(); ++k)
                if (c.inputs[k].differentiable() && dtype != DType::f32) host[k].copy_(host[k].to(dtype));
            std::vector<Tensor> probe = card;
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
            const auto got = run_case(c, c.run, card, upstream);
            REQUIRE(got.size() == want.size());
            const double tolerance = dtype == DType::f32 ? 1e-5 : c.bf16_tolerance;
            for (std::size_t i = 0; i < got.size(); ++i) {
                INFO(c.name << " in " << std::string(name_of(dtype)) << (i == 0 ? std::string(": output") : ": gradient of input " + std::to_string(i)));
                CHECK(relative_error(got[i], want[i]) <= tolerance);
            }
        }
    }
}

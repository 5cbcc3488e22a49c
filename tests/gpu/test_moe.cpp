// A sparse mixture of experts on the GPU against the CPU: topk's choices,
// the block's output, routing and gradients in f32, and in bf16 within what
// bf16 keeps. Skipped, and counted as skipped, where no GPU is present.
#include "levers/core/gpu.hpp"
#include "levers/core/rng.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/topk.hpp"
#include "levers/nn/sparse_moe.hpp"
#include "tests/gpu/no_gpu.hpp"
#include "tests/gpu/gpu_values.hpp"
#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::testing;


TEST_CASE("topk and a sparse mixture of experts on the GPU match the CPU" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    const Tensor scores = random_tensor({37, 9}, 1);
    CHECK(ops::topk(scores.to(Device::cuda(0)), 3).second.to(Device::cpu()).values() == ops::topk(scores, 3).second.values());
    const nn::SparseMoe::Options o{.dim = 16, .hidden = 24, .experts = 6, .top_k = 2};
    const Tensor x0 = random_tensor({3, 7, 16}, 2), r = random_tensor({3, 7, 16}, 3);
    for (const DType compute : {DType::f32, DType::bf16}) {
        CAPTURE(name_of(compute));
        nn::SparseMoe cpu(o), gpu(o);
        cpu.initialize(4);
        gpu.initialize(4);
        gpu.to(Device::cuda(0), compute);
        auto run = [&](nn::SparseMoe& m, Device d) {
            Tensor x = x0.to(d, d.is_cpu() ? DType::f32 : compute).requires_grad_();
            m.params().zero_grad();
            const Tensor y = m(x);
            ops::sum(y * r.to(d, x.dtype())).backward();
            return std::vector<std::vector<double>>{y.to(Device::cpu()).values(), x.grad().to(Device::cpu()).values(),
                                                    m.params().grads().to(Device::cpu()).values()};
        };
        const auto want = run(cpu, Device::cpu()), got = run(gpu, Device::cuda(0));
        if (compute == DType::f32) CHECK(gpu.tokens_per_expert() == cpu.tokens_per_expert());
        for (std::size_t k = 0; k < got.size(); ++k)
            CHECK(relative_error(got[k], want[k]) < (compute == DType::f32 ? 1e-5 : 5e-2));
    }
}

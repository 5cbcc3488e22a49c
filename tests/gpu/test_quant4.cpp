// 4-bit weights on the GPU against the CPU: the same codes and scales from
// the same weight, the same bits dequantized (f32; bf16 the f32 values
// rounded once), the 4-bit linear layer's output and gradients within f32's
// and bf16's tolerances, in one tile and in many, and a tiny Llama held in 4
// bits with adapters. Skipped, and counted as skipped, where no GPU is present.
#include "levers/core/gpu.hpp"
#include "levers/core/rng.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/quant4.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/nn/lora.hpp"
#include "levers/nn/quantize.hpp"
#include "tests/gpu/no_gpu.hpp"
#include "tests/gpu/gpu_values.hpp"
#include "tests/ops/op_cases.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::testing;

namespace {

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).values(); }
}  // namespace

TEST_CASE("4-bit weights on the GPU: the CPU's codes, scales and dequantized bits" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    const Tensor w = random_tensor({67, 129}, 1);  // blocks across rows, an odd count of values
    for (const Quant4Type type : {Quant4Type::nf4, Quant4Type::fp4})
        for (const bool dq : {false, true}) {
            CAPTURE(ops::name_of(type));
            CAPTURE(dq);
            const ops::Quant4Spec spec{.type = type, .double_quant = dq};
            const auto cpu = ops::quantize_4bit(w, spec);
            const auto gpu = ops::quantize_4bit(w.to(Device::cuda(0)), spec);
            CHECK(gpu.device() == Device::cuda(0));
            CHECK(values(gpu.codes) == values(cpu.codes));
            CHECK(values(dq ? gpu.absmax_codes : gpu.absmax) == values(dq ? cpu.absmax_codes : cpu.absmax));
            CHECK(gpu.offset == cpu.offset);
            const auto want = values(ops::dequantize_4bit(cpu, DType::f32));
            CHECK(values(ops::dequantize_4bit(gpu, DType::f32)) == want);
            CHECK(values(ops::dequantize_4bit(cpu.to(Device::cuda(0)), DType::f32)) == want);
            const auto half = values(ops::dequantize_4bit(gpu, DType::bf16));
            for (std::size_t i = 0; i < want.size(); ++i)
                REQUIRE(half[i] == bf16_to_float(float_to_bf16(static_cast<float>(want[i]))));
            const auto part = values(ops::dequantize_4bit(gpu, DType::f32, 3, 5, 7, 100));
            for (std::int64_t r = 0; r < 5; ++r)
                for (std::int64_t c = 0; c < 100; ++c) REQUIRE(part[r * 100 + c] == want[(r + 3) * 129 + c + 7]);
        }
}

TEST_CASE("the 4-bit linear layer on the GPU matches the CPU: output and gradients, f32 and bf16, tiled" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    const Tensor w = random_tensor({48, 192}, 2), x0 = random_tensor({2, 5, 192}, 3), b0 = random_tensor({48}, 4);
    const Tensor r = random_tensor({2, 5, 48}, 5);
    const auto q = std::make_shared<const ops::Quantized4>(ops::quantize_4bit(w, {}));
    const auto qg = std::make_shared<const ops::Quantized4>(q->to(Device::cuda(0)));
    auto run = [&](const std::shared_ptr<const ops::Quantized4>& weight, Device device, DType dtype, std::int64_t tile) {
        Tensor x = x0.to(device, dtype).requires_grad_(), b = b0.to(device, dtype).requires_grad_();
        const Tensor y = ops::linear_4bit(x, weight, b, tile);
        ops::sum(y * r.to(device, dtype)).backward();
        return std::vector<std::vector<double>>{values(y), values(x.grad()), values(b.grad())};
    };
    const auto want = run(q, Device::cpu(), DType::f32, ops::kLinear4Tile);
    for (const DType dtype : {DType::f32, DType::bf16})
        for (const std::int64_t tile : {ops::kLinear4Tile, std::int64_t(48 * 64), std::int64_t(500)}) {
            CAPTURE(name_of(dtype));
            CAPTURE(tile);
            const auto got = run(qg, Device::cuda(0), dtype, tile);
            for (std::size_t k = 0; k < got.size(); ++k)
                CHECK(relative_error(got[k], want[k]) <= (dtype == DType::f32 ? 1e-5 : 2e-2));
        }
}

TEST_CASE("a Llama held in 4 bits on the GPU matches the CPU's: loss and adapter gradients in f32, and in bf16 within "
          "what bf16 keeps" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::LlamaConfig c = tiny_llama();
    std::vector<std::int32_t> ids(2 * 9), next(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        ids[i] = static_cast<std::int32_t>((i * 7 + 3) % 40);
        next[i] = static_cast<std::int32_t>((i * 5 + 1) % 40);
    }
    const Tensor x = Tensor::from(ids, {2, 9}), y = Tensor::from(next, {2, 9});
    for (const DType compute : {DType::f32, DType::bf16}) {
        CAPTURE(name_of(compute));
        models::Llama cpu(c, 4), gpu(c, 4);
        for (models::Llama* m : {&cpu, &gpu}) {
            nn::attach_lora(*m, 4, 8, 1, {"all-linear"});
            for (nn::Linear* l : nn::linear_layers(*m))  // adapters that change the output
                if (l->has_lora()) l->lora_b()->value().fill_(0.01);
            nn::hold_linears_in_4bit(*m, {});
        }
        gpu.to(Device::cuda(0), compute);
        if (compute == DType::f32) {  // the logits of the same model with its weights dequantized, on the GPU
            models::Llama dense(c, 4);
            nn::attach_lora(dense, 4, 8, 1, {"all-linear"});
            for (nn::Linear* l : nn::linear_layers(dense)) {
                if (l->has_lora()) l->lora_b()->value().fill_(0.01);
                if (l->name() != "lm_head")
                    l->weight.value().copy_from(ops::dequantize_4bit(ops::quantize_4bit(l->weight.value(), {}), DType::f32));
            }
            dense.parameters_changed();
            dense.to(Device::cuda(0), compute);
            CHECK(relative_error(values(gpu.logits(x)), values(dense.logits(x))) < 1e-6);
        }
        const Tensor a = cpu.loss(x, y), b = gpu.loss(x, y);
        a.backward();
        b.backward();
        CHECK(b.item() == doctest::Approx(a.item()).epsilon(compute == DType::f32 ? 1e-5 : 2e-2));
        CHECK(relative_error(values(gpu.params().grads()), values(cpu.params().grads())) <
              (compute == DType::f32 ? 1e-5 : 5e-2));
    }
}

#include "levers/core/shape_trace.hpp"
#include "levers/core/tensor.hpp"
#include "levers/core/tensor_memory.hpp"
#include "levers/kernels/matmul.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace levers;

namespace {
// This process's resident memory in bytes (/proc/self/statm's second field, in pages).
std::size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * 4096;
}
}  // namespace

TEST_CASE("the tensor memory ledger counts persistent buffers and pool blocks, with the most held at once") {
    MemoryLedger& cpu = tensor_memory(Device::Kind::cpu);
    const std::size_t before = cpu.held();
    {
        Tensor p = Tensor::persistent({1000}, DType::f32);  // 4000 bytes, rounded to 64
        CHECK(cpu.held() == before + 4032);
        cpu.reset_peak();
        {
            Tensor q = Tensor::persistent({16}, DType::f64);
            CHECK(cpu.peak() == before + 4032 + 128);
        }
        CHECK(cpu.held() == before + 4032);
        CHECK(cpu.peak() == before + 4032 + 128);
    }
    CHECK(cpu.held() == before);
    MemoryLedger ledger;
    ledger.add(100);
    ledger.add(50);
    ledger.remove(120);
    CHECK(ledger.held() == 30);
    CHECK(ledger.peak() == 150);
}

TEST_CASE("a shape trace computes nothing, commits no memory and counts what the tensors would hold") {
    MemoryLedger& real = tensor_memory(Device::Kind::cpu);
    const std::size_t real_before = real.held(), resident_before = resident_bytes();
    {
        ShapeTrace trace;
        CHECK(shape_tracing());
        CHECK_THROWS_WITH_AS(ShapeTrace(), doctest::Contains("a shape trace is open already"), Error);
        // 8 GiB of weights and an 8192 x 8192 product: shapes only.
        Tensor w = Tensor::persistent({1 << 15, 1 << 16}, DType::f32);
        Tensor a = Tensor::zeros({8192, 1 << 15}, DType::f32);
        Tensor y = ops::matmul(a, w.slice(0, 1 << 15).narrow(1, 0, 8192));
        CHECK(y.shape() == Shape{8192, 8192});
        MemoryLedger& traced = trace.memory(Device::Kind::cpu);
        CHECK(traced.held() >= (std::size_t{8} << 30) + (std::size_t{1} << 30) + (std::size_t{256} << 20));
        CHECK(real.held() == real_before);  // nothing reached the process's own ledger
        CHECK(resident_bytes() < resident_before + (std::size_t{64} << 20));
        // Host code may still write a small tensor it made (a batch of token ids).
        Tensor ids = Tensor::empty({16}, DType::i32);
        ids.data<std::int32_t>()[3] = 7;
        CHECK(ids.data<std::int32_t>()[3] == 7);
    }
    CHECK(!shape_tracing());
    CHECK(real.held() == real_before);
    // Outside the trace, ops compute again.
    Tensor x = Tensor::full({2, 2}, 3.0, DType::f32);
    CHECK(ops::matmul(x, x).values() == std::vector<double>{18, 18, 18, 18});
}

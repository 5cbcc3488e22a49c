#include "levers/core/error.hpp"
#include "levers/core/params.hpp"
#include "levers/core/storage_pool.hpp"
#include "levers/core/tensor.hpp"

#include <doctest/doctest.h>

using namespace levers;

TEST_CASE("tensor views and slices share memory") {
    Tensor t = Tensor::zeros({4, 3}, DType::f32);
    CHECK(t.numel() == 12);
    CHECK(t.bytes() == 48);
    Tensor rows = t.slice(1, 3);
    CHECK(rows.shape() == Shape{2, 3});
    rows.data<float>()[0] = 5;
    CHECK(t.data<float>()[3] == 5);
    Tensor flat = t.view({12});
    CHECK(flat.data<float>()[3] == 5);
    CHECK_THROWS_WITH_AS(t.view({5, 2}), doctest::Contains("cannot view a tensor of shape [4, 3] as [5, 2]"), Error);
    CHECK_THROWS_WITH_AS(t.slice(2, 5), doctest::Contains("slice [2, 5) is out of range for shape [4, 3]"), Error);
    CHECK_THROWS_WITH_AS(t.data<double>(), doctest::Contains("tensor holds f32 but was read as f64"), Error);
}

TEST_CASE("the storage pool hands out aligned memory and reuses a block once its last tensor is gone") {
    StoragePool& pool = cpu_pool();
    void* first = nullptr;
    {
        Tensor a = Tensor::empty({1000}, DType::f32);
        CHECK(reinterpret_cast<std::uintptr_t>(a.raw()) % 64 == 0);
        first = a.raw();
        Tensor b = Tensor::empty({1000}, DType::f32);  // a is still held: another block
        CHECK(b.raw() != first);
        Tensor view = a.slice(10, 20);  // a view keeps the block in use too
        a = Tensor();
        Tensor c = Tensor::empty({1000}, DType::f32);
        CHECK(c.raw() != first);
    }
    const std::size_t before = pool.stats().allocations;
    Tensor again = Tensor::empty({900}, DType::f32);  // the same size class, now free: no new block
    CHECK(pool.stats().allocations == before);
    CHECK(StoragePool::rounded(3600) >= 3600);
    CHECK(StoragePool::rounded(3600) <= 3600 * 5 / 4);
    Tensor big = Tensor::empty({1 << 20}, DType::f64);
    CHECK(pool.stats().in_use >= big.bytes());
}

TEST_CASE("tensors convert between f32, f64 and bf16, and copy to the host for values and item()") {
    const Tensor t = Tensor::from(std::vector<float>{1.5f, -2.25f, 3.0f}, {3});
    CHECK(t.to(Device::cpu(), DType::f64).values() == std::vector<double>{1.5, -2.25, 3.0});
    CHECK(t.to(Device::cpu(), DType::bf16).values() == std::vector<double>{1.5, -2.25, 3.0});  // exact in bf16
    CHECK(Tensor::full({1}, 0.1, DType::f64).item() == 0.1);
    CHECK_THROWS_WITH_AS(t.item(), doctest::Contains("item() of a tensor of shape [3]"), Error);
    CHECK_THROWS_WITH_AS(Tensor::from(std::vector<float>{1, 2}, {3}), doctest::Contains("2 values cannot fill"), Error);
}

TEST_CASE("parameter set: one flat buffer, aligned views, decay flags") {
    ParamSet ps;
    int w = ps.add("w", {3, 5}, true);
    int b = ps.add("b", {5}, false);
    ps.allocate();
    CHECK(ps.entries()[1].offset % 16 == 0);
    CHECK(ps.size() == ps.entries()[1].offset + 5);
    ps.param<float>(b)[4] = 2;
    CHECK(ps.params().data<float>()[ps.entries()[1].offset + 4] == 2);
    CHECK(ps.param_tensor(w).shape() == Shape{3, 5});
    CHECK(ps.grad_tensor(b).data<float>() == ps.grads().data<float>() + ps.entries()[1].offset);
    CHECK_FALSE(ps.entries()[b].decay);
    CHECK(ps.find("b") == b);
    CHECK(ps.find("nope") == -1);
    CHECK_THROWS_AS(ps.add("late", {1}, true), Error);
}

TEST_CASE("parameter set: gradients in bf16 only on a GPU; f64 parameters by conversion; frozen sets have none") {
    ParamSet ps;
    ps.add("w", {3, 5}, true);
    ps.add("b", {5}, false);
    ps.allocate();
    CHECK(ps.grad_dtype() == DType::f32);
    CHECK_THROWS_WITH_AS(ps.to_device(Device::cpu(), DType::bf16),
                         doctest::Contains("gradients in bf16 for f32 parameters on cpu: only f32 there"), Error);
    CHECK(ps.grad_dtype() == DType::f32);  // refused before anything changed
    ps.param<float>(1)[2] = 0.25f;
    ps.convert(DType::f64);
    CHECK(ps.dtype() == DType::f64);
    CHECK(ps.param<double>(1)[2] == 0.25);
    CHECK_THROWS_WITH_AS(ps.allocate(DType::bf16), doctest::Contains("parameters are f32 or f64, not bf16"), Error);
    ParamSet frozen;
    frozen.add("w", {2}, true);
    frozen.allocate(DType::f32, /*with_grads=*/false);
    CHECK_FALSE(frozen.has_grads());
    CHECK_THROWS_WITH_AS(frozen.grad_tensor(0), doctest::Contains("'w' has no gradient"), Error);
}

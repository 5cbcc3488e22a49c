#include "framework/core/error.hpp"
#include "framework/core/params.hpp"
#include "framework/core/tensor.hpp"

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

TEST_CASE("arena hands out aligned memory and merges blocks on reset") {
    Arena arena(256);
    Tensor a = Tensor::in_arena(arena, {10}, DType::f32);
    Tensor b = Tensor::in_arena(arena, {100}, DType::f64);  // larger than a block
    CHECK(reinterpret_cast<std::uintptr_t>(a.raw()) % Arena::kAlign == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b.raw()) % Arena::kAlign == 0);
    CHECK(arena.used_bytes() == 64 + 832);
    std::size_t capacity = arena.capacity_bytes();
    arena.reset();
    CHECK(arena.used_bytes() == 0);
    CHECK(arena.capacity_bytes() == capacity);  // one merged block now
    Tensor c = Tensor::in_arena(arena, {200}, DType::f32);
    CHECK(arena.capacity_bytes() == capacity);  // fits without growing
}

TEST_CASE("parameter set: one flat buffer, aligned views, decay flags") {
    ParamSet<float> ps;
    int w = ps.add("w", {3, 5}, true);
    int b = ps.add("b", {5}, false);
    ps.allocate();
    CHECK(ps.entries()[1].offset % 16 == 0);
    CHECK(ps.size() == ps.entries()[1].offset + 5);
    ps.param(b)[4] = 2;
    CHECK(ps.params().data<float>()[ps.entries()[1].offset + 4] == 2);
    CHECK(ps.param_tensor(w).shape() == Shape{3, 5});
    CHECK_FALSE(ps.entries()[b].decay);
    CHECK_THROWS_AS(ps.add("late", {1}, true), Error);
}

TEST_CASE("parameter set: gradients in bf16 only on a card, the offsets of grad_raw in that dtype") {
    ParamSet<float> ps;
    ps.add("w", {3, 5}, true);
    const int b = ps.add("b", {5}, false);
    ps.allocate();
    CHECK(ps.grad_dtype() == DType::f32);
    CHECK(static_cast<float*>(ps.grad_raw(b)) == ps.grad(b));
    CHECK_THROWS_WITH_AS(ps.to_device(Device::cpu(), DType::bf16),
                         doctest::Contains("gradients in bf16 for f32 parameters on cpu: only f32 there"), Error);
    CHECK(ps.grad_dtype() == DType::f32);  // refused before anything changed
}

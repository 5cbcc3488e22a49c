// A strided-free, contiguous n-d tensor: shape, dtype, device and shared memory.
// On a card, data<T>() is a device pointer: only kernels may read it.
//
// Tensors are cheap handles: copies share memory. view() reshapes and slice()
// takes a range of the first dimension, both without copying. Memory comes from
// the heap (Tensor::empty) or from an Arena (Tensor::in_arena).
#pragma once

#include "framework/core/arena.hpp"
#include "framework/core/device.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/error.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace levers {

class Shape {
public:
    static constexpr int kMaxDims = 6;
    Shape() = default;
    Shape(std::initializer_list<std::int64_t> dims);
    explicit Shape(const std::vector<std::int64_t>& dims);

    int ndim() const { return ndim_; }
    std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
    std::int64_t numel() const;
    bool operator==(const Shape& o) const;
    std::string str() const;  // "[2, 3]"
    Shape with_dim(int i, std::int64_t size) const;  // copy with dimension i replaced

private:
    std::array<std::int64_t, kMaxDims> dims_{};
    int ndim_ = 0;
};

class Tensor {
public:
    Tensor() = default;

    // Zero-filled memory: the heap, or the card's (device_memory.hpp).
    static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
    // Uninitialised memory from `arena` (valid until the arena is reset).
    static Tensor in_arena(Arena& arena, Shape shape, DType dtype);

    const Shape& shape() const { return shape_; }
    std::int64_t dim(int i) const { return shape_[i]; }
    std::int64_t numel() const { return shape_.numel(); }
    DType dtype() const { return dtype_; }
    Device device() const { return device_; }
    std::size_t bytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype_); }
    bool defined() const { return memory_ != nullptr; }

    // Same memory, new shape with the same element count.
    Tensor view(Shape shape) const;
    // Rows [begin, end) of the first dimension, sharing memory.
    Tensor slice(std::int64_t begin, std::int64_t end) const;

    // Typed element access; throws if T does not match dtype().
    template <class T> T* data() const {
        LEVERS_CHECK(dtype_of<T>() == dtype_, "tensor holds {} but was read as {}", name_of(dtype_),
                     name_of(dtype_of<T>()));
        return reinterpret_cast<T*>(memory_.get());
    }
    void* raw() const { return memory_.get(); }

    void zero();                          // fill with zeros
    void copy_from(const Tensor& other);  // same shape and dtype required; any devices
    // This tensor on `device`: itself if already there, else a copy.
    Tensor to(Device device) const;

private:
    Tensor(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device)
        : memory_(std::move(memory)), shape_(shape), dtype_(dtype), device_(device) {}

    std::shared_ptr<std::byte> memory_;  // points at element 0 (aliasing its allocation)
    Shape shape_;
    DType dtype_ = DType::f32;
    Device device_;
};

}  // namespace levers

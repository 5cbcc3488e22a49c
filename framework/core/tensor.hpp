// A contiguous n-d tensor: shape, dtype, device and shared memory, and the
// autograd record of how it was computed (framework/core/autograd.hpp).
// On a card, data<T>() is a device pointer: only kernels may read it.
//
// Tensors are cheap handles: copies share memory. view() reshapes and slice()
// takes a range of the first dimension, both without copying (and both are
// recorded, so gradients flow through them). Memory comes from the device's
// StoragePool (framework/core/storage_pool.hpp) and returns to it when the
// last handle goes.
//
// A tensor computed by recorded ops belongs to the thread that computed it:
// copy and destroy it there.
#pragma once

#include "framework/core/device.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/error.hpp"
#include "framework/core/shape.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace levers {

class ParamSet;

namespace autograd {
class Tape;
// Which recorded op made a tensor: its node in the thread's tape, in the
// tape's generation (a reset tape makes older references stale).
struct ValueRef {
    Tape* tape = nullptr;
    std::uint32_t generation = 0;
    std::int32_t node = -1;
    std::int32_t output = 0;
};
struct Leaf;  // autograd.hpp
}  // namespace autograd

class Tensor {
public:
    Tensor() = default;
    Tensor(const Tensor& other);
    Tensor(Tensor&& other) noexcept;
    Tensor& operator=(const Tensor& other);
    Tensor& operator=(Tensor&& other) noexcept;
    ~Tensor();

    // Uninitialised memory from the device's pool.
    static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
    static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
    // Zeroed memory of its own, outside the pools (given back to the system
    // when the last handle goes): for long-lived buffers such as parameters,
    // gradients and optimizer moments, which a pool would keep cached.
    static Tensor persistent(Shape shape, DType dtype, Device device = Device::cpu());
    // Every element `value` (f32, f64 or bf16 tensors).
    static Tensor full(Shape shape, double value, DType dtype, Device device = Device::cpu());
    // A copy of host values (f32, f64 or i32) on `device`.
    template <class T> static Tensor from(const std::vector<T>& values, Shape shape, Device device = Device::cpu());
    // Memory someone else owns and keeps alive through `memory` (a mapped file, a flat buffer).
    static Tensor wrap(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device = Device::cpu());

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
    const std::shared_ptr<std::byte>& memory() const { return memory_; }

    // These write the memory, not the handle (as data<T>() does): const.
    void zero() const;                          // fill with zeros (not recorded)
    void copy_from(const Tensor& other) const;  // same shape and dtype required; any devices (not recorded)
    // The same for any float dtypes (f32, f64, bf16), `other` on this tensor's device (not recorded).
    void convert_from(const Tensor& other) const;
    // This tensor on `device`: itself if already there, else a copy (not recorded).
    Tensor to(Device device) const;
    // Converted to `dtype` on `device` (not recorded): f32, f64 and bf16 into each other.
    Tensor to(Device device, DType dtype) const;
    Tensor clone() const;   // a copy in new memory (not recorded)
    Tensor detach() const;  // the same memory, without the record
    // Every element as double, on the host (for tests and small results).
    std::vector<double> values() const;
    // The single element, on the host (waits for the card).
    double item() const;

    // --- autograd -----------------------------------------------------------
    // Whether gradients reach this tensor: a leaf that asked for them, or the
    // output of an op recorded on inputs that need them.
    bool requires_grad() const;
    // Makes this tensor a leaf that accumulates a gradient in grad() when a
    // backward reaches it (the same memory; the handle becomes the leaf).
    Tensor& requires_grad_(bool on = true);
    // A leaf's gradient so far (undefined before a backward reached it).
    Tensor grad() const;
    // Computes the gradient of this one-element tensor with respect to every
    // leaf it depends on, adding into their gradients, then frees the graph.
    // Throws levers::Error if this tensor was not computed by recorded ops or
    // its graph was freed by an earlier backward.
    void backward() const;
    // The same for any shape, with d(out)/d(this) given.
    void backward(const Tensor& gradient) const;

    // For the autograd engine and nn::Parameter.
    const autograd::ValueRef& value_ref() const { return value_; }
    autograd::Leaf* leaf() const { return leaf_.get(); }
    const std::shared_ptr<autograd::Leaf>& leaf_ptr() const { return leaf_; }
    void set_leaf(std::shared_ptr<autograd::Leaf> leaf) { leaf_ = std::move(leaf); }
    void set_value_ref(const autograd::ValueRef& ref);

private:
    Tensor(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device)
        : memory_(std::move(memory)), shape_(shape), dtype_(dtype), device_(device) {}
    void retain() const;
    void release() const;

    std::shared_ptr<std::byte> memory_;  // points at element 0 (aliasing its allocation)
    Shape shape_;
    DType dtype_ = DType::f32;
    Device device_;
    std::shared_ptr<autograd::Leaf> leaf_;  // set for leaves (parameters, requires_grad_())
    autograd::ValueRef value_;              // set for outputs of recorded ops
};

extern template Tensor Tensor::from<float>(const std::vector<float>&, Shape, Device);
extern template Tensor Tensor::from<double>(const std::vector<double>&, Shape, Device);
extern template Tensor Tensor::from<std::int32_t>(const std::vector<std::int32_t>&, Shape, Device);

}  // namespace levers

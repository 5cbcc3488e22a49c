// An n-d tensor: shared memory (its first element), shape, strides, dtype and
// device, and the autograd record of how it was computed
// (levers/core/autograd.hpp). On a GPU, data<T>() is a device pointer:
// only kernels may read it.
//
// Tensors are cheap handles: copies share memory. Views share it too and are
// free: reshape (a view where the strides allow, else a copy), transpose,
// permute, narrow, slice (with a step), select, expand, unsqueeze, squeeze,
// flatten; contiguous() copies only a tensor that is not. Views are
// recorded, so gradients flow through them. Memory comes from the device's
// StoragePool (levers/core/storage_pool.hpp) and returns to it when the
// last handle goes.
//
// A tensor computed by recorded ops belongs to the thread that computed it:
// copy and destroy it there.
#pragma once

#include "levers/core/device.hpp"
#include "levers/core/dtype.hpp"
#include "levers/core/error.hpp"
#include "levers/core/shape.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace levers {

class ParamSet;

// A short list of dimension numbers (at most Shape::kMaxDims, negative ones
// counting from the end), kept inline: what reductions and permute take.
class Dims {
public:
    Dims() = default;
    Dims(std::initializer_list<int> dims);
    explicit Dims(const std::vector<int>& dims);
    int size() const { return n_; }
    bool empty() const { return n_ == 0; }
    int operator[](int i) const { return v_[static_cast<std::size_t>(i)]; }
    const int* begin() const { return v_.data(); }
    const int* end() const { return v_.data() + n_; }
    void push_back(int d);

private:
    std::array<int, Shape::kMaxDims> v_{};
    int n_ = 0;
};

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
    // Every element `value` (any dtype).
    static Tensor full(Shape shape, double value, DType dtype, Device device = Device::cpu());
    // A copy of host values (f32, f64, i32 or bool) on `device`.
    template <class T> static Tensor from(const std::vector<T>& values, Shape shape, Device device = Device::cpu());
    // Memory someone else owns and keeps alive through `memory` (a mapped file, a flat buffer).
    static Tensor wrap(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device = Device::cpu());

    const Shape& shape() const { return shape_; }
    const Strides& strides() const { return strides_; }
    // Size and stride of dimension i (negative i counts from the end).
    std::int64_t dim(int i) const { return shape_[i < 0 ? i + shape_.ndim() : i]; }
    std::int64_t stride(int i) const { return strides_[i < 0 ? i + shape_.ndim() : i]; }
    int ndim() const { return shape_.ndim(); }
    std::int64_t numel() const { return shape_.numel(); }
    DType dtype() const { return dtype_; }
    Device device() const { return device_; }
    // numel() · size_of(dtype()): the bytes a contiguous copy holds.
    std::size_t bytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype_); }
    bool defined() const { return memory_ != nullptr; }
    // Whether the elements lie row-major without gaps (what most kernels read).
    bool is_contiguous() const { return strides_.contiguous_for(shape_); }

    // --- views: the same memory, recorded for autograd ------------------------
    // Dimensions may be negative, counting from the end; a bad one is a
    // levers::Error naming the method, the argument and the shape.
    // The same elements in a new shape (one size may be -1: inferred).
    // view() needs strides that allow it; reshape() copies where they do not.
    Tensor view(Shape shape) const;
    Tensor view(std::initializer_list<std::int64_t> sizes) const;
    Tensor reshape(Shape shape) const;
    Tensor reshape(std::initializer_list<std::int64_t> sizes) const;
    // Dimensions start..end (inclusive) as one; unflatten splits one into `sizes`.
    Tensor flatten(int start = 0, int end = -1) const;
    Tensor unflatten(int dim, std::initializer_list<std::int64_t> sizes) const;
    // Two dimensions swapped; all of them reordered (dims[i]: the old dimension that becomes i).
    Tensor transpose(int dim0, int dim1) const;
    Tensor permute(const Dims& dims) const;
    // The last two dimensions swapped (a matrix's transpose, batched).
    Tensor mT() const { return transpose(-2, -1); }
    // Rows [begin, end) of the first dimension.
    Tensor slice(std::int64_t begin, std::int64_t end) const;
    // Elements begin, begin + step, ... before end of dimension `dim` (negative
    // begin and end count from the end; end is clamped to the size).
    Tensor slice(int dim, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const;
    // `length` elements of `dim` from `start`.
    Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
    // Element `index` of `dim`, which goes away.
    Tensor select(int dim, std::int64_t index) const;
    // Repeated along dimensions of size 1, and new leading ones, without copying
    // (-1 keeps a size); expand_as(other) to other's shape.
    Tensor expand(Shape shape) const;
    Tensor expand(std::initializer_list<std::int64_t> sizes) const;
    Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
    // A dimension of size 1 inserted at `dim`; removed (all of them, without an argument).
    Tensor unsqueeze(int dim) const;
    Tensor squeeze(int dim) const;
    Tensor squeeze() const;
    // This tensor if contiguous, else a contiguous copy (recorded).
    Tensor contiguous() const;

    // Typed element access; throws if T does not match dtype(). The pointer is
    // the first element: index it through strides() unless is_contiguous().
    template <class T> T* data() const {
        LEVERS_CHECK(dtype_of<T>() == dtype_, "tensor holds {} but was read as {}", name_of(dtype_),
                     name_of(dtype_of<T>()));
        return reinterpret_cast<T*>(memory_.get());
    }
    void* raw() const { return memory_.get(); }
    const std::shared_ptr<std::byte>& memory() const { return memory_; }

    // These write the memory, not the handle (as data<T>() does): const. None is recorded.
    void zero() const;                          // fill with zeros
    void fill_(double value) const;             // every element `value`
    void copy_from(const Tensor& other) const;  // same shape and dtype required; any devices, any strides
    // Elements of `other` (broadcast to this shape, any dtype, on this
    // tensor's device), converted to this dtype: the strided copy everything uses.
    void copy_(const Tensor& other) const;
    // The same for any float dtypes (f32, f64, bf16), `other` on this tensor's device (not recorded).
    void convert_from(const Tensor& other) const { copy_(other); }
    // This tensor on `device`: itself if already there, else a contiguous copy (not recorded).
    Tensor to(Device device) const;
    // Converted to `dtype` on `device` (not recorded): any dtypes into each
    // other (bools become 0 and 1; non-zero becomes true).
    Tensor to(Device device, DType dtype) const;
    Tensor to(DType dtype) const { return to(device_, dtype); }
    Tensor clone() const;   // a contiguous copy in new memory (not recorded)
    Tensor detach() const;  // the same memory, without the record
    // Every element as double, on the host (for tests and small results).
    std::vector<double> values() const;
    // The single element, on the host (waits for the GPU).
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

    // The same memory seen through another shape and strides, `offset`
    // elements on (for views; not recorded).
    Tensor as_strided(Shape shape, Strides strides, std::int64_t offset = 0) const;

private:
    Tensor(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device)
        : memory_(std::move(memory)), shape_(shape), strides_(Strides::contiguous(shape)), dtype_(dtype), device_(device) {}
    void retain() const;
    void release() const;

    std::shared_ptr<std::byte> memory_;  // points at element 0 (aliasing its allocation)
    Shape shape_;
    Strides strides_;
    DType dtype_ = DType::f32;
    Device device_;
    std::shared_ptr<autograd::Leaf> leaf_;  // set for leaves (parameters, requires_grad_())
    autograd::ValueRef value_;              // set for outputs of recorded ops
};

extern template Tensor Tensor::from<float>(const std::vector<float>&, Shape, Device);
extern template Tensor Tensor::from<double>(const std::vector<double>&, Shape, Device);
extern template Tensor Tensor::from<std::int32_t>(const std::vector<std::int32_t>&, Shape, Device);
extern template Tensor Tensor::from<std::uint8_t>(const std::vector<std::uint8_t>&, Shape, Device);
template <> Tensor Tensor::from<bool>(const std::vector<bool>& values, Shape shape, Device device);

// Dimension `dim` of an `ndim`-dimensional tensor, negative counting from the
// end; a levers::Error naming `op` where there is no such dimension.
int wrap_dim(const char* op, int dim, int ndim);
// The shape `a` and `b` broadcast to (NumPy's rule: trailing dimensions
// aligned, each pair equal or one of them 1); a levers::Error naming `op` and
// both shapes where they do not.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Whether they broadcast.
bool broadcastable(const Shape& a, const Shape& b);

}  // namespace levers

#include "framework/core/tensor.hpp"

#include "framework/core/device_memory.hpp"

#include <cstdlib>
#include <cstring>

namespace levers {

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(const std::vector<std::int64_t>& dims) {
    LEVERS_CHECK(dims.size() <= kMaxDims, "a shape has at most {} dimensions, got {}", kMaxDims, dims.size());
    for (std::int64_t d : dims) {
        LEVERS_CHECK(d >= 0, "shape dimensions must be >= 0, got {}", d);
        dims_[static_cast<std::size_t>(ndim_++)] = d;
    }
}

std::int64_t Shape::numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= (*this)[i];
    return n;
}

bool Shape::operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
        if ((*this)[i] != o[i]) return false;
    return true;
}

Shape Shape::with_dim(int i, std::int64_t size) const {
    LEVERS_CHECK(0 <= i && i < ndim_ && size >= 0, "with_dim({}, {}) on shape {}", i, size, str());
    Shape out = *this;
    out.dims_[static_cast<std::size_t>(i)] = size;
    return out;
}

std::string Shape::str() const {
    std::string s = "[";
    for (int i = 0; i < ndim_; ++i) s += fmt::format("{}{}", i ? ", " : "", (*this)[i]);
    return s + "]";
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
    if (!device.is_cpu()) {
        Tensor t(device_alloc(static_cast<std::size_t>(shape.numel()) * size_of(dtype)), shape, dtype, device);
        t.zero();
        return t;
    }
    std::size_t bytes = static_cast<std::size_t>(shape.numel()) * size_of(dtype);
    std::size_t padded = (bytes + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign;
    void* p = std::aligned_alloc(Arena::kAlign, padded == 0 ? Arena::kAlign : padded);
    LEVERS_CHECK(p != nullptr, "out of memory: could not allocate a tensor of {} bytes", bytes);
    std::memset(p, 0, bytes);
    std::shared_ptr<std::byte> mem(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
    return Tensor(std::move(mem), shape, dtype, device);
}

Tensor Tensor::in_arena(Arena& arena, Shape shape, DType dtype) {
    return Tensor(arena.alloc(static_cast<std::size_t>(shape.numel()) * size_of(dtype)), shape, dtype,
                  Device::cpu());
}

Tensor Tensor::view(Shape shape) const {
    LEVERS_CHECK(shape.numel() == numel(), "cannot view a tensor of shape {} as {}", shape_.str(), shape.str());
    return Tensor(memory_, shape, dtype_, device_);
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
    LEVERS_CHECK(shape_.ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                 "slice [{}, {}) is out of range for shape {}", begin, end, shape_.str());
    std::int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
    Shape out = shape_.with_dim(0, end - begin);
    std::size_t offset = static_cast<std::size_t>(begin * row) * size_of(dtype_);
    return Tensor(std::shared_ptr<std::byte>(memory_, memory_.get() + offset), out, dtype_, device_);
}

void Tensor::zero() {
    if (!device_.is_cpu())
        device_zero(raw(), bytes());
    else if (bytes() > 0)
        std::memset(raw(), 0, bytes());
}

void Tensor::copy_from(const Tensor& other) {
    LEVERS_CHECK(other.shape() == shape_ && other.dtype() == dtype_, "copy_from: {} {} into {} {}",
                 name_of(other.dtype()), other.shape().str(), name_of(dtype_), shape_.str());
    if (device_.is_cpu() && other.device().is_cpu()) {
        if (bytes() > 0) std::memmove(raw(), other.raw(), bytes());
    } else {
        device_copy(raw(), other.raw(), bytes());
    }
}

Tensor Tensor::to(Device device) const {
    if (device == device_) return *this;
    Tensor out = zeros(shape_, dtype_, device);
    out.copy_from(*this);
    return out;
}

}  // namespace levers

#include "framework/core/tensor.hpp"

#include "framework/core/autograd.hpp"
#include "framework/core/device_memory.hpp"
#include "framework/core/dispatch.hpp"
#include "framework/core/storage_pool.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

namespace levers {

namespace {
template <class Dims> void fill_dims(std::array<std::int64_t, Shape::kMaxDims>& out, int& ndim, const Dims& dims) {
    LEVERS_CHECK(dims.size() <= Shape::kMaxDims, "a shape has at most {} dimensions, got {}", Shape::kMaxDims,
                 dims.size());
    for (std::int64_t d : dims) {
        LEVERS_CHECK(d >= 0, "shape dimensions must be >= 0, got {}", d);
        out[static_cast<std::size_t>(ndim++)] = d;
    }
}
}  // namespace

Shape::Shape(std::initializer_list<std::int64_t> dims) { fill_dims(dims_, ndim_, dims); }
Shape::Shape(const std::vector<std::int64_t>& dims) { fill_dims(dims_, ndim_, dims); }

Shape Shape::appended(std::int64_t size) const {
    LEVERS_CHECK(ndim_ < kMaxDims && size >= 0, "appending {} to shape {}", size, str());
    Shape out = *this;
    out.dims_[static_cast<std::size_t>(out.ndim_++)] = size;
    return out;
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

// --- handles: a recorded tensor's copies are counted by its tape ------------

void Tensor::retain() const {
    if (value_.tape && value_.generation == value_.tape->generation()) value_.tape->retain();
}
void Tensor::release() const {
    if (value_.tape && value_.generation == value_.tape->generation()) value_.tape->release();
}

Tensor::Tensor(const Tensor& o)
    : memory_(o.memory_), shape_(o.shape_), dtype_(o.dtype_), device_(o.device_), leaf_(o.leaf_), value_(o.value_) {
    retain();
}

Tensor::Tensor(Tensor&& o) noexcept
    : memory_(std::move(o.memory_)),
      shape_(o.shape_),
      dtype_(o.dtype_),
      device_(o.device_),
      leaf_(std::move(o.leaf_)),
      value_(o.value_) {
    o.value_ = {};
}

Tensor& Tensor::operator=(const Tensor& o) {
    if (this == &o) return *this;
    o.retain();
    release();
    memory_ = o.memory_;
    shape_ = o.shape_;
    dtype_ = o.dtype_;
    device_ = o.device_;
    leaf_ = o.leaf_;
    value_ = o.value_;
    return *this;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
    if (this == &o) return *this;
    release();
    memory_ = std::move(o.memory_);
    shape_ = o.shape_;
    dtype_ = o.dtype_;
    device_ = o.device_;
    leaf_ = std::move(o.leaf_);
    value_ = o.value_;
    o.value_ = {};
    return *this;
}

Tensor::~Tensor() { release(); }

void Tensor::set_value_ref(const autograd::ValueRef& ref) {
    release();
    value_ = ref;
    retain();
}

// --- making tensors ----------------------------------------------------------

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
    const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * size_of(dtype);
    return Tensor(device.is_cpu() ? cpu_pool().take(bytes) : device_alloc(bytes), shape, dtype, device);
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
    Tensor t = empty(shape, dtype, device);
    t.zero();
    return t;
}

Tensor Tensor::persistent(Shape shape, DType dtype, Device device) {
    const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * size_of(dtype);
    const std::size_t size = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
    std::shared_ptr<std::byte> memory;
    if (device.is_cpu()) {
        void* p = std::aligned_alloc(64, size);
        LEVERS_CHECK(p != nullptr, "out of memory on the CPU: {:.1f} MiB asked for", size / 1048576.0);
        memory.reset(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
    } else {
        memory = device_alloc_unpooled(size);
    }
    Tensor t(std::move(memory), shape, dtype, device);
    t.zero();
    return t;
}

namespace {
// Host values converted to `to` into `dst` (n elements of `from` at `src`).
void convert_on_host(void* dst, DType to, const void* src, DType from, std::int64_t n) {
    auto get = [&](std::int64_t i) -> double {
        switch (from) {
            case DType::f32: return static_cast<const float*>(src)[i];
            case DType::f64: return static_cast<const double*>(src)[i];
            case DType::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(src)[i]);
            case DType::i32: return static_cast<const std::int32_t*>(src)[i];
        }
        return 0;
    };
    for (std::int64_t i = 0; i < n; ++i) {
        const double x = get(i);
        switch (to) {
            case DType::f32: static_cast<float*>(dst)[i] = static_cast<float>(x); break;
            case DType::f64: static_cast<double*>(dst)[i] = x; break;
            case DType::bf16: static_cast<std::uint16_t*>(dst)[i] = float_to_bf16(static_cast<float>(x)); break;
            case DType::i32: static_cast<std::int32_t*>(dst)[i] = static_cast<std::int32_t>(x); break;
        }
    }
}
}  // namespace

Tensor Tensor::full(Shape shape, double value, DType dtype, Device device) {
    Tensor host = empty(shape, dtype);
    for (std::int64_t i = 0; i < host.numel(); ++i)
        convert_on_host(static_cast<std::byte*>(host.raw()) + i * static_cast<std::int64_t>(size_of(dtype)), dtype,
                        &value, DType::f64, 1);
    return host.to(device);
}

template <class T> Tensor Tensor::from(const std::vector<T>& values, Shape shape, Device device) {
    LEVERS_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "{} values cannot fill a tensor of shape {}",
                 values.size(), shape.str());
    Tensor host = empty(shape, dtype_of<T>());
    if (!values.empty()) std::memcpy(host.raw(), values.data(), host.bytes());
    return host.to(device);
}
template Tensor Tensor::from<float>(const std::vector<float>&, Shape, Device);
template Tensor Tensor::from<double>(const std::vector<double>&, Shape, Device);
template Tensor Tensor::from<std::int32_t>(const std::vector<std::int32_t>&, Shape, Device);

Tensor Tensor::wrap(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device) {
    return Tensor(std::move(memory), shape, dtype, device);
}

// --- views and copies --------------------------------------------------------

Tensor Tensor::view(Shape shape) const {
    LEVERS_CHECK(shape.numel() == numel(), "cannot view a tensor of shape {} as {}", shape_.str(), shape.str());
    Tensor out(memory_, shape, dtype_, device_);
    autograd::record_view(*this, out);
    return out;
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
    LEVERS_CHECK(shape_.ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                 "slice [{}, {}) is out of range for shape {}", begin, end, shape_.str());
    std::int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
    Shape out_shape = shape_.with_dim(0, end - begin);
    std::size_t offset = static_cast<std::size_t>(begin * row) * size_of(dtype_);
    Tensor out(std::shared_ptr<std::byte>(memory_, memory_.get() + offset), out_shape, dtype_, device_);
    autograd::record_slice(*this, out, begin);
    return out;
}

Tensor Tensor::detach() const { return Tensor(memory_, shape_, dtype_, device_); }

void Tensor::zero() const {
    if (bytes() == 0) return;
    if (!device_.is_cpu())
        device_zero(raw(), bytes());
    else
        std::memset(raw(), 0, bytes());
}

void Tensor::copy_from(const Tensor& other) const {
    LEVERS_CHECK(other.shape() == shape_ && other.dtype() == dtype_, "copy_from: {} {} into {} {}",
                 name_of(other.dtype()), other.shape().str(), name_of(dtype_), shape_.str());
    if (bytes() == 0) return;
    if (device_.is_cpu() && other.device().is_cpu())
        std::memmove(raw(), other.raw(), bytes());
    else
        device_copy(raw(), other.raw(), bytes());
}

Tensor Tensor::to(Device device) const {
    if (device == device_) return *this;
    Tensor out = empty(shape_, dtype_, device);
    out.copy_from(*this);
    return out;
}

Tensor Tensor::to(Device device, DType dtype) const {
    if (dtype == dtype_) return to(device);
    // Converted where the data is on the host (every pair of dtypes), else on the card.
    const Tensor src = device.is_cpu() || device_.is_cpu() ? to(Device::cpu()) : to(device);
    Tensor out = empty(shape_, dtype, src.device());
    out.convert_from(src);
    return out.to(device);
}

void Tensor::convert_from(const Tensor& other) const {
    LEVERS_CHECK(other.shape() == shape_ && other.device() == device_, "convert_from: {} {} on {} into {} {} on {}",
                 name_of(other.dtype()), other.shape().str(), other.device().str(), name_of(dtype_), shape_.str(),
                 device_.str());
    if (other.dtype() == dtype_) return copy_from(other);
    if (device_.is_cpu()) return convert_on_host(raw(), dtype_, other.raw(), other.dtype(), numel());
    // On the card: the backend's conversion kernel (t0 = out in its dtype, t1 = in).
    static KernelSlot& convert = kernel_slot("convert");
    KernelCall call;
    call.t[0] = {raw(), shape_, dtype_};
    call.t[1] = {other.raw(), other.shape(), other.dtype()};
    run_kernel(convert, device_, dtype_, call);
}

Tensor Tensor::clone() const {
    Tensor out = empty(shape_, dtype_, device_);
    out.copy_from(*this);
    return out;
}

std::vector<double> Tensor::values() const {
    const Tensor host = to(Device::cpu());
    std::vector<double> out(static_cast<std::size_t>(numel()));
    convert_on_host(out.data(), DType::f64, host.raw(), dtype_, numel());
    return out;
}

double Tensor::item() const {
    LEVERS_CHECK(numel() == 1, "item() of a tensor of shape {}: it needs exactly one element", shape_.str());
    double x = 0;
    std::array<std::byte, 8> bits{};
    if (device_.is_cpu())
        std::memcpy(bits.data(), raw(), size_of(dtype_));
    else
        device_copy(bits.data(), raw(), size_of(dtype_));
    convert_on_host(&x, DType::f64, bits.data(), dtype_, 1);
    return x;
}

}  // namespace levers

#include "levers/core/tensor.hpp"

#include "levers/core/autograd.hpp"
#include "levers/core/device_memory.hpp"
#include "levers/core/dispatch.hpp"
#include "levers/core/generic_calls.hpp"
#include "levers/core/shape_trace.hpp"
#include "levers/core/storage_pool.hpp"

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
    : memory_(o.memory_),
      shape_(o.shape_),
      strides_(o.strides_),
      dtype_(o.dtype_),
      device_(o.device_),
      leaf_(o.leaf_),
      value_(o.value_) {
    retain();
}

Tensor::Tensor(Tensor&& o) noexcept
    : memory_(std::move(o.memory_)),
      shape_(o.shape_),
      strides_(o.strides_),
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
    strides_ = o.strides_;
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
    strides_ = o.strides_;
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
    if (ShapeTrace* trace = shape_trace()) return Tensor(trace->pool(device.kind).take(bytes), shape, dtype, device);
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
    if (ShapeTrace* trace = shape_trace()) return Tensor(trace->persistent(device.kind, size), shape, dtype, device);
    std::shared_ptr<std::byte> memory;
    MemoryLedger* ledger = &tensor_memory(device.kind);
    if (device.is_cpu()) {
        void* p = std::aligned_alloc(64, size);
        LEVERS_CHECK(p != nullptr, "out of memory on the CPU: {:.1f} MiB asked for", size / 1048576.0);
        memory.reset(static_cast<std::byte*>(p), [ledger, size](std::byte* q) {
            std::free(q);
            ledger->remove(size);
        });
    } else {
        auto gpu = device_alloc_unpooled(size);
        std::byte* p = gpu.get();
        memory.reset(p, [gpu = std::move(gpu), ledger, size](std::byte*) mutable {
            gpu.reset();
            ledger->remove(size);
        });
    }
    ledger->add(size);
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
            case DType::boolean: return static_cast<const bool*>(src)[i] ? 1.0 : 0.0;
            case DType::u8: return static_cast<const std::uint8_t*>(src)[i];
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
            case DType::boolean: static_cast<bool*>(dst)[i] = x != 0; break;
            case DType::u8: static_cast<std::uint8_t*>(dst)[i] = static_cast<std::uint8_t>(x); break;
        }
    }
}
}  // namespace

Tensor Tensor::full(Shape shape, double value, DType dtype, Device device) {
    Tensor t = empty(shape, dtype, device);
    t.fill_(value);
    return t;
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
template Tensor Tensor::from<std::uint8_t>(const std::vector<std::uint8_t>&, Shape, Device);
template <> Tensor Tensor::from<bool>(const std::vector<bool>& values, Shape shape, Device device) {
    LEVERS_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "{} values cannot fill a tensor of shape {}",
                 values.size(), shape.str());
    Tensor host = empty(shape, DType::boolean);
    for (std::size_t i = 0; i < values.size(); ++i) host.data<bool>()[i] = values[i];
    return host.to(device);
}

Tensor Tensor::wrap(std::shared_ptr<std::byte> memory, Shape shape, DType dtype, Device device) {
    return Tensor(std::move(memory), shape, dtype, device);
}

// --- copies --------------------------------------------------------------------

Tensor Tensor::detach() const {
    Tensor out(memory_, shape_, dtype_, device_);
    out.strides_ = strides_;
    return out;
}

Tensor Tensor::as_strided(Shape shape, Strides strides, std::int64_t offset) const {
    Tensor out(std::shared_ptr<std::byte>(memory_, memory_.get() + offset * static_cast<std::int64_t>(size_of(dtype_))),
               shape, dtype_, device_);
    out.strides_ = strides;
    return out;
}

namespace {
// Runs the elementwise kernel `slot` (fill or copy) on `out` for its dtype.
void elementwise(const KernelSlot& slot, const Tensor& out, const Tensor* in, double value) {
    ElementwiseCall call;
    call.out = {out.raw(), out.shape(), out.strides(), out.dtype()};
    if (in) call.in[0] = {in->raw(), in->shape(), in->strides(), in->dtype()};
    call.p[0] = value;
    run_kernel(slot, out.device(), out.dtype(), call);
}
}  // namespace

void Tensor::zero() const {
    if (numel() == 0 || shape_tracing()) return;
    if (!is_contiguous()) return fill_(0);
    if (!device_.is_cpu())
        device_zero(raw(), bytes());
    else
        std::memset(raw(), 0, bytes());
}

void Tensor::fill_(double value) const {
    static const KernelSlot& fill = kernel_slot_of<ElementwiseCall>("fill");
    if (numel() > 0) elementwise(fill, *this, nullptr, value);
}

void Tensor::copy_(const Tensor& other) const {
    LEVERS_CHECK(other.device() == device_, "copy_: the source is on {}, this tensor on {}: move it with to() first",
                 other.device().str(), device_.str());
    static const KernelSlot& copy = kernel_slot_of<ElementwiseCall>("copy");
    LEVERS_CHECK(broadcastable(other.shape(), shape_) && broadcast_shapes("copy_", other.shape(), shape_) == shape_,
                 "copy_: a {} source does not broadcast to this tensor's {}", other.shape().str(), shape_.str());
    if (numel() == 0 || (shape_tracing() && bytes() > kTracedCopyBytes)) return;
    if (other.dtype() == dtype_ && other.shape() == shape_ && is_contiguous() && other.is_contiguous()) {
        if (device_.is_cpu())
            std::memmove(raw(), other.raw(), bytes());
        else
            device_copy(raw(), other.raw(), bytes());
        return;
    }
    elementwise(copy, *this, &other, 0);
}

void Tensor::copy_from(const Tensor& other) const {
    LEVERS_CHECK(other.shape() == shape_ && other.dtype() == dtype_, "copy_from: {} {} into {} {}",
                 name_of(other.dtype()), other.shape().str(), name_of(dtype_), shape_.str());
    if (other.device() == device_) return copy_(other);
    // Between devices the bytes move contiguously, then land in this layout.
    const Tensor src = other.contiguous();
    if (is_contiguous()) {
        if (bytes() > 0) device_copy(raw(), src.raw(), bytes());
        return;
    }
    Tensor staged = empty(shape_, dtype_, device_);
    if (bytes() > 0) device_copy(staged.raw(), src.raw(), bytes());
    copy_(staged);
}

Tensor Tensor::to(Device device) const {
    if (device == device_) return *this;
    Tensor out = empty(shape_, dtype_, device);
    out.copy_from(*this);
    return out;
}

Tensor Tensor::to(Device device, DType dtype) const {
    if (dtype == dtype_) return to(device);
    // Converted where the data is (the GPU converts what its kernels do), then moved.
    const Tensor src = device_.is_cpu() || device.is_cpu() ? to(Device::cpu()) : *this;
    Tensor out = empty(shape_, dtype, src.device());
    out.copy_(src);
    return out.to(device);
}

Tensor Tensor::clone() const {
    Tensor out = empty(shape_, dtype_, device_);
    out.copy_(*this);
    return out;
}

std::vector<double> Tensor::values() const {
    const Tensor host = contiguous().to(Device::cpu());
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

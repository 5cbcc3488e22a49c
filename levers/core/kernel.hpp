// The calling convention of every kernel, on every device, and the table that
// finds a kernel by op name, device kind and dtype (as ggml's backends take a
// tensor and its sources).
//
// Each op names the fields of its call in a struct of its own, deriving from
// KernelCallBase: `struct LayerNormCall : KernelCallBase { static constexpr
// const char* kName = "layernorm"; TensorArg out, mean, rstd, x, weight, bias;
// double eps; }`. The op fills it by name, every backend's kernel takes it
// by type (`void layernorm(const LayerNormCall&)`), and LEVERS_KERNEL
// registers the kernel under its call's name: a kernel that reads another
// op's call does not compile. A name used with two call types (two ops
// sharing a name, or a backend built against other headers) fails on first
// use, naming the op. Families of ops that share one call (the elementwise
// ops) register each name with LEVERS_KERNEL_NAMED.
//
// Nothing here needs fmt, so CUDA files register their kernels themselves.
#pragma once

#include "levers/core/device.hpp"
#include "levers/core/dtype.hpp"
#include "levers/core/shape.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace levers {

// A tensor as a kernel sees it: its first element (in the call's device's
// memory), shape, strides (in elements) and dtype. Kernels whose header says
// so take any strides; the others are given contiguous tensors.
struct TensorArg {
    void* data = nullptr;
    Shape shape;
    Strides strides;
    DType dtype = DType::f32;

    bool defined() const { return data != nullptr; }
    std::int64_t numel() const { return shape.numel(); }
    bool contiguous() const { return strides.contiguous_for(shape); }
    template <class T> T* as() const { return static_cast<T*>(data); }
};

// What every kernel call carries besides its own fields.
struct KernelCallBase {
    void* stream = nullptr;  // set by run_kernel: the device's compute stream (a cudaStream_t); null on the CPU
};

// A kernel as the table keeps it: its call passed as the base, cast back by invoke_kernel.
using KernelFn = void (*)(const KernelCallBase& call);
template <class Call, void (*Fn)(const Call&)> void invoke_kernel(const KernelCallBase& call) {
    Fn(static_cast<const Call&>(call));
}

// Every implementation of one kernel, by device kind and dtype.
class KernelSlot {
public:
    KernelSlot(const char* name, std::size_t call_size) : name_(name), call_size_(call_size) {}
    const char* name() const { return name_; }
    std::size_t call_size() const { return call_size_; }
    KernelFn find(Device::Kind device, DType dtype) const {
        return table_[static_cast<int>(device)][static_cast<int>(dtype)];
    }
    void set(Device::Kind device, DType dtype, KernelFn fn) {
        table_[static_cast<int>(device)][static_cast<int>(dtype)] = fn;
    }

private:
    const char* name_;
    std::size_t call_size_;
    std::array<std::array<KernelFn, kDTypes>, Device::kKinds> table_{};
};

// The slot called `name`, whose calls are `call_size` bytes, made on first
// use; slots live as long as the process. Throws levers::Error where the
// name was used with calls of another size.
KernelSlot& kernel_slot(const char* name, std::size_t call_size);
// The slot of an op whose call is `Call` (under Call::kName, or `name` for a family).
template <class Call> KernelSlot& kernel_slot_of() {
    static KernelSlot& slot = kernel_slot(Call::kName, sizeof(Call));
    return slot;
}
template <class Call> KernelSlot& kernel_slot_of(const char* name) { return kernel_slot(name, sizeof(Call)); }
// Registers `fn` (a backend's file does this at load time; returns true).
bool register_kernel(const char* name, std::size_t call_size, Device::Kind device, DType dtype, KernelFn fn);

}  // namespace levers

#define LEVERS_KERNEL_CONCAT2(a, b) a##b
#define LEVERS_KERNEL_CONCAT(a, b) LEVERS_KERNEL_CONCAT2(a, b)
// LEVERS_KERNEL(LayerNormCall, cpu, f32, layernorm<float>): registers, at load
// time, `void layernorm<float>(const LayerNormCall&)` as the op's CPU f32 kernel.
#define LEVERS_KERNEL(Call, device, dtype, fn) LEVERS_KERNEL_NAMED(Call::kName, Call, device, dtype, fn)
// The same under `name`, for ops that share one call type.
#define LEVERS_KERNEL_NAMED(name, Call, device, dtype, fn)                                            \
    [[maybe_unused]] static const bool LEVERS_KERNEL_CONCAT(levers_kernel_registered_, __COUNTER__) = \
        ::levers::register_kernel(name, sizeof(Call), ::levers::Device::Kind::device, ::levers::DType::dtype, \
                                  &::levers::invoke_kernel<Call, fn>)

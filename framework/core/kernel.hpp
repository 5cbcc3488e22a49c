// The one calling convention of every kernel, on every device, and the table
// that finds a kernel by op name, device kind and dtype (as ggml's backends
// take a tensor and its sources). An op's header (kernels/<op>.hpp) says what
// each slot of the call holds; each backend's file registers its
// implementations with LEVERS_KERNEL. Nothing here needs fmt, so CUDA files
// register their kernels themselves.
#pragma once

#include "framework/core/device.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/shape.hpp"

#include <array>
#include <cstdint>

namespace levers {

// A tensor as a kernel sees it: its memory (on the call's device), shape and dtype.
struct TensorArg {
    void* data = nullptr;
    Shape shape;
    DType dtype = DType::f32;

    bool defined() const { return data != nullptr; }
    std::int64_t numel() const { return shape.numel(); }
    template <class T> T* as() const { return static_cast<T*>(data); }
};

// One kernel call: tensors in the slots the op's header names, integer and
// real attributes, and (on a card) the stream to queue on.
struct KernelCall {
    static constexpr int kTensors = 12;
    std::array<TensorArg, kTensors> t{};
    std::array<std::int64_t, 6> i{};
    std::array<double, 6> f{};
    void* stream = nullptr;    // the device's compute stream (a cudaStream_t); null on the CPU
    double* result = nullptr;  // where a kernel that reduces to one number puts it (host memory)
};

using KernelFn = void (*)(const KernelCall&);

// Every implementation of one kernel, by device kind and dtype.
class KernelSlot {
public:
    explicit KernelSlot(const char* name) : name_(name) {}
    const char* name() const { return name_; }
    KernelFn find(Device::Kind device, DType dtype) const {
        return table_[static_cast<int>(device)][static_cast<int>(dtype)];
    }
    void set(Device::Kind device, DType dtype, KernelFn fn) {
        table_[static_cast<int>(device)][static_cast<int>(dtype)] = fn;
    }

private:
    const char* name_;
    std::array<std::array<KernelFn, kDTypes>, Device::kKinds> table_{};
};

// The slot called `name`, made on first use; slots live as long as the process.
KernelSlot& kernel_slot(const char* name);
// Registers `fn` (a backend's file does this at load time; returns true).
bool register_kernel(const char* name, Device::Kind device, DType dtype, KernelFn fn);

}  // namespace levers

#define LEVERS_KERNEL_CONCAT2(a, b) a##b
#define LEVERS_KERNEL_CONCAT(a, b) LEVERS_KERNEL_CONCAT2(a, b)
// LEVERS_KERNEL(gelu, cpu, f32, gelu_forward_f32): registers a kernel at load time.
#define LEVERS_KERNEL(name, device, dtype, fn)                                                   \
    [[maybe_unused]] static const bool LEVERS_KERNEL_CONCAT(levers_kernel_registered_, __COUNTER__) = \
        ::levers::register_kernel(#name, ::levers::Device::Kind::device, ::levers::DType::dtype, fn)

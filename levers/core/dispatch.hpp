// Finding and running a kernel for a device and dtype (levers/core/kernel.hpp
// holds the calling convention). A kernel that no loaded backend offers is a
// MissingKernel error naming the op, what was asked and what exists: the
// framework's `--device auto` catches it and keeps the model on the CPU.
#pragma once

#include "levers/core/error.hpp"
#include "levers/core/kernel.hpp"

#include <string>

namespace levers {

class MissingKernel : public Error {
public:
    MissingKernel(const KernelSlot& slot, Device device, DType dtype);
    const std::string& op() const { return op_; }
    Device device() const { return device_; }
    DType dtype() const { return dtype_; }

private:
    std::string op_;
    Device device_;
    DType dtype_;
};

// The kernel of `slot` for `device` and `dtype` (loading the GPU backend
// first where the device is a GPU); throws MissingKernel.
KernelFn kernel_for(const KernelSlot& slot, Device device, DType dtype);
// Runs it with the device's compute stream in call.stream.
void run_kernel(const KernelSlot& slot, Device device, DType dtype, KernelCallBase& call);
// The same for an op's own call type (its slot found once).
template <class Call> void run_kernel(Device device, DType dtype, Call& call) {
    run_kernel(kernel_slot_of<Call>(), device, dtype, call);
}
// Whether a kernel called `name` exists there.
bool has_kernel(const char* name, Device::Kind device, DType dtype);
// "cpu f32, cpu f64, cuda bf16": where the kernel exists.
std::string kernels_available(const KernelSlot& slot);

}  // namespace levers

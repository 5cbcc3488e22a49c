#include "levers/core/dispatch.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/device_runtime.hpp"
#include "levers/core/shape_trace.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace levers {

namespace {
struct Registry {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<KernelSlot>, std::less<>> slots;
};
Registry& registry() {
    static Registry* r = new Registry;  // never destroyed: backends may register while others unload
    return *r;
}
}  // namespace

KernelSlot& kernel_slot(const char* name, std::size_t call_size) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.slots.find(name);
    if (it == r.slots.end()) it = r.slots.emplace(name, std::make_unique<KernelSlot>(name, call_size)).first;
    KernelSlot& slot = *it->second;
    LEVERS_CHECK(slot.call_size() == call_size,
                 "op '{}' is used with calls of {} and {} bytes: two ops share the name, or a backend was built "
                 "against other headers",
                 name, slot.call_size(), call_size);
    return slot;
}

bool register_kernel(const char* name, std::size_t call_size, Device::Kind device, DType dtype, KernelFn fn) {
    kernel_slot(name, call_size).set(device, dtype, fn);
    return true;
}

std::string kernels_available(const KernelSlot& slot) {
    std::string out;
    for (int d = 0; d < Device::kKinds; ++d)
        for (int t = 0; t < kDTypes; ++t)
            if (slot.find(static_cast<Device::Kind>(d), static_cast<DType>(t)))
                out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name_of(static_cast<Device::Kind>(d)),
                                   name_of(static_cast<DType>(t)));
    return out.empty() ? "none" : out;
}

MissingKernel::MissingKernel(const KernelSlot& slot, Device device, DType dtype)
    : Error("", fmt::format("op '{}' has no kernel for {} {} (it has: {})", slot.name(), name_of(device.kind),
                            name_of(dtype), kernels_available(slot))),
      op_(slot.name()),
      device_(device),
      dtype_(dtype) {}

KernelFn kernel_for(const KernelSlot& slot, Device device, DType dtype) {
    if (device.kind == Device::Kind::cuda) load_device_backend();  // its kernels register as it loads
    KernelFn fn = slot.find(device.kind, dtype);
    if (!fn) throw MissingKernel(slot, device, dtype);
    return fn;
}

void run_kernel(const KernelSlot& slot, Device device, DType dtype, KernelCallBase& call) {
    if (shape_tracing()) return;  // shapes only: the op made its outputs, nothing is computed
    KernelFn fn = kernel_for(slot, device, dtype);
    call.stream = device.is_cpu() ? nullptr : compute_stream();
    fn(call);
}

bool has_kernel(const char* name, Device::Kind device, DType dtype) {
    if (device == Device::Kind::cuda) load_device_backend();
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    const auto it = r.slots.find(name);
    return it != r.slots.end() && it->second->find(device, dtype) != nullptr;
}

}  // namespace levers

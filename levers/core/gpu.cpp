#include "levers/core/gpu.hpp"

#include "levers/core/device_runtime.hpp"
#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace levers {

namespace {
// GPUs need NVIDIA's driver: without it there is nothing to open the
// backend for (an emulated GPU, LEVERS_CUDA_BACKEND, needs none).
bool may_have_gpus() {
    if (env::get("LEVERS_CUDA_BACKEND")) return true;
    std::error_code ec;
    return std::filesystem::exists("/proc/driver/nvidia/version", ec) || std::filesystem::exists("/dev/nvidiactl", ec);
}
DeviceRuntime* gpus() { return may_have_gpus() ? device_runtime() : nullptr; }
}  // namespace

int gpu_count() {
    DeviceRuntime* rt = gpus();
    return rt ? rt->count() : 0;
}

int node_gpu_count() {
    if (gpu_count() == 0) return 0;
    std::error_code ec;
    int n = 0;
    for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end; ++it) ++n;
    return n > 0 ? n : gpu_count();
}

std::vector<std::string> gpu_names() {
    DeviceRuntime* rt = gpus();
    return rt ? rt->names() : std::vector<std::string>{};
}

void use_gpu(int index) {
    DeviceRuntime* rt = gpus();
    LEVERS_CHECK(rt != nullptr, "GPU {} asked for, but {}", index,
                 device_backend_installed() ? (device_backend_error().empty() ? "this machine has no NVIDIA driver"
                                                                               : device_backend_error())
                                            : "this build of levers has no CUDA backend (nvcc was not found when "
                                              "it was configured)");
    const int n = rt->count();
    LEVERS_CHECK(index >= 0 && index < n, "GPU {} asked for, but this process sees {} GPU{} (CUDA_VISIBLE_DEVICES "
                 "limits them)", index, n, n == 1 ? "" : "s");
    rt->set_current(index);
}

bool built_with_cuda() { return device_backend_installed(); }

}  // namespace levers

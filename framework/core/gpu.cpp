#include "framework/core/gpu.hpp"

#include "framework/core/error.hpp"

#if defined(LEVERS_CUDA)
#include "framework/core/cuda_check.hpp"
#endif

#include <filesystem>
#include <system_error>

namespace levers {

int node_gpu_count() {
    if (gpu_count() == 0) return 0;
    std::error_code ec;
    int n = 0;
    for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end; ++it) ++n;
    return n > 0 ? n : gpu_count();
}

#if defined(LEVERS_CUDA)

int gpu_count() {
    int n = 0;
    // No driver (35), no device (100) or any other failure here: no usable card.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky error for later calls
        return 0;
    }
    return n;
}

std::vector<std::string> gpu_names() {
    std::vector<std::string> names;
    for (int i = 0; i < gpu_count(); ++i) {
        cudaDeviceProp prop{};
        LEVERS_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
        names.emplace_back(prop.name);
    }
    return names;
}

void use_gpu(int index) {
    const int n = gpu_count();
    LEVERS_CHECK(index >= 0 && index < n, "card {} asked for, but this process sees {} card{} (CUDA_VISIBLE_DEVICES "
                 "limits them)", index, n, n == 1 ? "" : "s");
    LEVERS_CUDA_CHECK(cudaSetDevice(index));
}

bool built_with_cuda() { return true; }

#else

int gpu_count() { return 0; }
std::vector<std::string> gpu_names() { return {}; }
void use_gpu(int index) {
    LEVERS_FAIL("card {} asked for, but this build of levers has no CUDA backend (nvcc was not found when it was "
                "configured)", index);
}
bool built_with_cuda() { return false; }

#endif

}  // namespace levers

// Dense peak rates of NVIDIA GPUs by the name CUDA reports (SXM parts; bf16
// on tensor cores, f32 without them, no sparsity), for the GPU benches'
// shares of peak. Zeros for a GPU not listed.
#pragma once

#include <string>

struct GpuPeaks {
    double bf16_flops = 0, f32_flops = 0, bytes_per_s = 0;
};

inline GpuPeaks gpu_peaks(const std::string& name) {
    if (name.find("H200") != std::string::npos) return {989e12, 67e12, 4.8e12};
    if (name.find("H100") != std::string::npos) return {989e12, 67e12, 3.35e12};
    if (name.find("A100") != std::string::npos) return {312e12, 19.5e12, 2.0e12};
    return {};
}

// Device memory for the GPU tests: a host vector's copy on the card and back.
#pragma once

#include "framework/core/cuda_check.hpp"

#include <cstddef>
#include <vector>

namespace levers::testing {

template <class T> class DeviceVector {
public:
    explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
        LEVERS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), n_ * sizeof(T) + 1));
        if (n_ > 0) LEVERS_CUDA_CHECK(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    }
    explicit DeviceVector(std::size_t n) : DeviceVector(std::vector<T>(n)) {}
    ~DeviceVector() { cudaFree(data_); }
    DeviceVector(const DeviceVector&) = delete;
    DeviceVector& operator=(const DeviceVector&) = delete;

    T* get() const { return data_; }
    std::vector<T> host() const {
        std::vector<T> out(n_);
        LEVERS_CUDA_CHECK(cudaDeviceSynchronize());
        if (n_ > 0) LEVERS_CUDA_CHECK(cudaMemcpy(out.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return out;
    }

private:
    std::size_t n_;
    T* data_ = nullptr;
};

}  // namespace levers::testing

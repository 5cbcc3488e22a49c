// What the GPU tests share: the precisions under test with their tolerances,
// host values rounded to what a storage type holds, their copies on the GPU
// and back, and closeness checks. A CUDA op in storage S is compared with the
// CPU op run in host_t<S> (double for f64, float otherwise) on the same,
// already rounded, inputs.
#pragma once

#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/core/dtype.hpp"
#include "levers/core/rng.hpp"
#include "levers/core/tensor.hpp"
#include "levers/kernels/cuda/ops.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace levers::testing {

using kernels::cuda::bf16;

template <class S> using host_t = std::conditional_t<std::is_same_v<S, double>, double, float>;

// Tolerances relative to the values' scale: `values` for what is stored in S
// (bf16 keeps about 3 significant digits), `sums` for what stays in the
// accumulator type (row statistics, losses, norms).
template <class S> struct Precision {
    static constexpr double values = 1e-5, sums = 1e-5;
};
template <> struct Precision<double> {
    static constexpr double values = 1e-10, sums = 1e-10;
};
template <> struct Precision<bf16> {
    static constexpr double values = 3e-2, sums = 1e-5;
};

// An f32 rounded to nearest even into bf16's 16 bits (levers/core/dtype.hpp).
inline std::uint16_t bf16_bits(float f) { return float_to_bf16(f); }

template <class S> host_t<S> rounded(double x) {
    if constexpr (std::is_same_v<S, bf16>)
        return bf16_to_float(bf16_bits(static_cast<float>(x)));
    else
        return static_cast<S>(x);
}

// Normal values times `scale`, rounded to S.
template <class S> std::vector<host_t<S>> random(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<host_t<S>> v(n);
    for (auto& x : v) x = rounded<S>(rng.normal() * scale);
    return v;
}

// A host f32 tensor of `shape` of those values (scale 1).
inline Tensor random_tensor(Shape shape, std::uint64_t seed) {
    return Tensor::from(random<float>(static_cast<std::size_t>(shape.numel()), seed), shape);
}

// Plain device memory holding a copy of host values (T as stored).
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

// Host values in storage type S on the GPU; host() brings them back as host_t<S>.
template <class S> class Gpu {
    using Raw = std::conditional_t<std::is_same_v<S, bf16>, std::uint16_t, S>;

public:
    using Host = host_t<S>;
    explicit Gpu(const std::vector<Host>& values) : raw_(to_raw(values)) {}
    explicit Gpu(std::size_t n) : raw_(n) {}
    S* get() const { return reinterpret_cast<S*>(raw_.get()); }
    std::vector<Host> host() const {
        if constexpr (std::is_same_v<S, bf16>) {
            std::vector<float> out;
            for (std::uint16_t b : raw_.host()) out.push_back(bf16_to_float(b));
            return out;
        } else {
            return raw_.host();
        }
    }

private:
    static std::vector<Raw> to_raw(const std::vector<Host>& values) {
        if constexpr (std::is_same_v<S, bf16>) {
            std::vector<std::uint16_t> out;
            for (float x : values) out.push_back(bf16_bits(x));
            return out;
        } else {
            return values;
        }
    }
    DeviceVector<Raw> raw_;
};

// The worst difference must be within `tolerance` times the values' scale.
template <class T>
void check_close(const char* what, const std::vector<T>& want, const std::vector<T>& got, double tolerance) {
    REQUIRE(want.size() == got.size());
    double scale = 1e-3, worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(want[i])));
        worst = std::max(worst, std::abs(static_cast<double>(want[i]) - static_cast<double>(got[i])));
    }
    INFO(what << ": worst difference " << worst << " at scale " << scale << ", tolerance " << tolerance);
    CHECK(worst <= tolerance * scale);
}

// ‖got − want‖ / ‖want‖: for whole gradients in bf16, where single small
// entries may differ by more than their own size but the direction must hold.
inline double relative_error(const std::vector<float>& want, const std::vector<float>& got) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        norm += double(want[i]) * want[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace levers::testing

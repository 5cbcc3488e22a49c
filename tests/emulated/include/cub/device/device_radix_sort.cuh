// cub's radix sort of key-value pairs on the emulated GPU: a stable sort by
// key (radix sorts are stable), with cub's two-call protocol for scratch,
// run when its stream gets to it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace cub {

struct DeviceRadixSort {
    template <class K, class V>
    static cudaError_t SortPairs(void* scratch, std::size_t& scratch_bytes, const K* keys_in, K* keys_out,
                                 const V* values_in, V* values_out, int n, int = 0, int = sizeof(K) * 8,
                                 cudaStream_t stream = nullptr) {
        if (n < 0) return cudaErrorInvalidValue;
        if (!scratch) {
            scratch_bytes = 1 + static_cast<std::size_t>(n) * sizeof(int);
            return cudaSuccess;
        }
        ::levers::emulation::enqueue(stream, [=] {
            std::vector<int> order(static_cast<std::size_t>(n));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
            std::vector<K> keys(order.size());
            std::vector<V> values(order.size());
            for (std::size_t i = 0; i < order.size(); ++i) {
                keys[i] = keys_in[order[i]];
                values[i] = values_in[order[i]];
            }
            std::copy(keys.begin(), keys.end(), keys_out);
            std::copy(values.begin(), values.end(), values_out);
        });
        return cudaSuccess;
    }
};

}  // namespace cub

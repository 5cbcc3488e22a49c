// Scratch for each thread of the next OpenMP region, taken from the CPU
// pool before the region starts. Its size depends on the problem and the
// thread count alone, never on which thread happens to run which task (a
// thread_local buffer grew the first time a thread won a dynamic-schedule
// task, so a steady step could allocate when the machine was busy), and
// steady steps take the same block again. Each thread's part is 64-byte
// aligned, as the pool's blocks are: a vectorised reduction's split depends
// on where the row lies, and this keeps it the same from run to run.
#pragma once

#include "levers/core/storage_pool.hpp"
#include "levers/core/threads.hpp"

#include <omp.h>

#include <cstddef>
#include <memory>

namespace levers::kernels::cpu {

template <class T> class ThreadScratch {
public:
    explicit ThreadScratch(std::size_t per_thread)
        : stride_((per_thread * sizeof(T) + 63) / 64 * 64 / sizeof(T)),
          block_(cpu_pool().take(static_cast<std::size_t>(threads()) * stride_ * sizeof(T))) {}
    // The calling thread's part (inside the region).
    T* mine() const { return reinterpret_cast<T*>(block_.get()) + static_cast<std::size_t>(omp_get_thread_num()) * stride_; }

private:
    std::size_t stride_;
    std::shared_ptr<std::byte> block_;
};

}  // namespace levers::kernels::cpu

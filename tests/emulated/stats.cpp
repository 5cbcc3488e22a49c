// What the emulated GPU was asked to do, counted, for comparing two
// implementations' work per training step (bench/emulated_step.sh):
// kernel launches, cuBLAS and cuBLASLt products, copies, memsets and
// cudaMalloc calls with their bytes. With LEVERS_EMULATED_STATS=FILE each
// process appends its counts to FILE as one JSON line when it exits.
#include "include/emulated_gpu.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace levers::emulation {

namespace {
struct Counts {
    std::atomic<long> launches{0}, products{0}, copies{0}, memsets{0}, mallocs{0};
    std::atomic<long long> malloc_bytes{0};
    ~Counts() {
        const char* path = std::getenv("LEVERS_EMULATED_STATS");
        if (!path || !*path) return;
        if (std::FILE* f = std::fopen(path, "a")) {
            std::fprintf(f,
                         "{\"pid\": %d, \"kernel_launches\": %ld, \"blas_products\": %ld, \"copies\": %ld, "
                         "\"memsets\": %ld, \"cuda_mallocs\": %ld, \"cuda_malloc_bytes\": %lld}\n",
                         static_cast<int>(getpid()), launches.load(), products.load(), copies.load(), memsets.load(),
                         mallocs.load(), malloc_bytes.load());
            std::fclose(f);
        }
    }
};
Counts counts;
}  // namespace

void count_launch() { ++counts.launches; }
void count_product() { ++counts.products; }
void count_copy() { ++counts.copies; }
void count_memset() { ++counts.memsets; }
void count_malloc(std::size_t bytes) {
    ++counts.mallocs;
    counts.malloc_bytes += static_cast<long long>(bytes);
}

}  // namespace levers::emulation

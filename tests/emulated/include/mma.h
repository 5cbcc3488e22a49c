// WMMA on the emulated GPU. Every lane holds the whole 16x16 fragment (the
// kernels never index a fragment's elements, so its layout across lanes is
// theirs not to know); an operand is loaded and a product computed once per
// warp, the other lanes copying it, as every lane would get the same matrix. Each _sync
// call first waits for the warp, as the real ones do; a store is made by
// lane 0, so a lane that reads the stored matrix without __syncwarp reads it
// unwritten, as it may on a GPU. Pointers must be 32-byte aligned and
// leading dimensions a multiple of 16 bytes, as on a GPU.
#pragma once

#include "emulated_gpu.hpp"

#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulated GPU has 16x16x16 fragments only");
    float element[16 * 16];
};

namespace detail {
inline float value(float x) { return x; }
inline float value(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class P> void check(const P* p, unsigned ld, const char* call) {
    if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0 || ld * sizeof(P) % 16 != 0) {
        std::fprintf(stderr, "emulated GPU: %s with pointer %p and leading dimension %u (needs 32-byte alignment "
                     "and rows a multiple of 16 bytes apart)\n", call, static_cast<const void*>(p), ld);
        std::abort();
    }
}
}  // namespace detail

template <class Use, class T, class Layout, class P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const P* p, unsigned ld) {
    static_assert(!std::is_same_v<Use, accumulator>, "accumulators load with a layout");
    namespace emulation = levers::emulation;
    detail::check(p, ld, "load_matrix_sync");
    emulation::sync_warp();
    emulation::Launch& l = *emulation::running;
    emulation::WarpProduct& loaded = l.loads[emulation::linear_thread / 32];
    const unsigned long call = ++l.load_calls[emulation::linear_thread];
    if (loaded.call != call) {
        for (int r = 0; r < 16; ++r)
            for (int c = 0; c < 16; ++c)
                loaded.value[r * 16 + c] =
                    detail::value(std::is_same_v<Layout, row_major> ? p[r * ld + c] : p[c * ld + r]);
        loaded.call = call;
    }
    std::memcpy(f.element, loaded.value, sizeof f.element);
}

template <class T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T>& f, const float* p, unsigned ld, layout_t layout) {
    detail::check(p, ld, "load_matrix_sync");
    levers::emulation::sync_warp();
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.element[r * 16 + c] = layout == mem_row_major ? p[r * ld + c] : p[c * ld + r];
}

template <class T>
void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, T>& f, unsigned ld, layout_t layout) {
    detail::check(p, ld, "store_matrix_sync");
    levers::emulation::sync_warp();
    if (levers::emulation::lane() != 0) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) (layout == mem_row_major ? p[r * ld + c] : p[c * ld + r]) = f.element[r * 16 + c];
}

template <class T> void fill_fragment(fragment<accumulator, 16, 16, 16, T>& f, float x) {
    for (float& e : f.element) e = x;
}

// d = a·b + c in f32 (bf16 products are exact in f32), computed once per
// warp: every lane holds the same fragments.
template <class TA, class LA, class TB, class LB, class T>
void mma_sync(fragment<accumulator, 16, 16, 16, T>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, T>& c) {
    namespace emulation = levers::emulation;
    emulation::sync_warp();
    emulation::Launch& l = *emulation::running;
    emulation::WarpProduct& product = l.products[emulation::linear_thread / 32];
    const unsigned long call = ++l.product_calls[emulation::linear_thread];
    if (product.call != call) {
        for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 16; ++j) {
                float sum = c.element[i * 16 + j];
                for (int k = 0; k < 16; ++k) sum += a.element[i * 16 + k] * b.element[k * 16 + j];
                product.value[i * 16 + j] = sum;
            }
        product.call = call;
    }
    std::memcpy(d.element, product.value, sizeof d.element);
}

}  // namespace nvcuda::wmma

// max_pool2d and its backward on the CPU (levers/kernels/conv.hpp): a plane
// per task, each window read in place (no columns), its winner's position
// kept for backward, which adds each output's gradient there.
#include "levers/kernels/conv.hpp"

#include "levers/kernels/cpu/im2col.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"
#include "levers/kernels/elementwise_math.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace levers::kernels::cpu {

namespace {

// Whether `x` replaces `best`: NaN wins, the first of equals stays (as the reductions choose).
template <class T> bool better(T x, T best) { return math::replaces_extreme(x, best, true); }

#if defined(__AVX2__) && !defined(__AVX512F__)
// The even and odd pixels of the 2n (n <= 8) from `r` on, each in lane order
// (lanes past n zero): a shuffle within halves, then one across them.
inline void split_pairs(const float* r, index_t n, __m256& even, __m256& odd) {
    const __m256 lo = load_first(r, 2 * n), hi = load_first(r + 8, 2 * n - 8);
    // [l0 l2 h0 h2 | l4 l6 h4 h6] as 64-bit pairs (0 1 2 3) becomes pairs 0 2 1 3.
    const auto order = [](__m256 v) { return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8)); };
    even = order(_mm256_shuffle_ps(lo, hi, 0x88));
    odd = order(_mm256_shuffle_ps(lo, hi, 0xDD));
}

// The inverse: the 2n values alternating even[i], odd[i] written from `r` on.
inline void join_pairs(float* r, index_t n, __m256 even, __m256 odd) {
    // a = [e0 o0 e1 o1 | e4 o4 e5 o5], b = [e2 o2 e3 o3 | e6 o6 e7 o7]: their low halves, then their high ones.
    const __m256 a = _mm256_unpacklo_ps(even, odd), b = _mm256_unpackhi_ps(even, odd);
    const __m256 lo = _mm256_permute2f128_ps(a, b, 0x20), hi = _mm256_permute2f128_ps(a, b, 0x31);
    store_first(r, lo, 2 * n);
    if (n > 4) store_first(r + 8, hi, 2 * n - 8);
}
#endif

// The usual 2x2 window at stride 2 inside the image: four loads and three
// selects an output; with vectors 16 (AVX-512) or 8 (AVX2) outputs at a time
// (the row pairs' even and odd pixels separated by permutes, the tail masked).
template <class T> void pool_2x2(const T* plane, T* out, std::int32_t* at, const Geometry& g) {
    const auto w = static_cast<std::int32_t>(g.w);
    for (index_t y = 0; y < g.oh; ++y) {
        const T* r0 = plane + 2 * y * g.w;
        const T* r1 = r0 + g.w;
        T* o = out + y * g.ow;
        std::int32_t* a = at + y * g.ow;
        const auto base = static_cast<std::int32_t>(2 * y * g.w);
        index_t x = 0;
#if defined(__AVX512F__)
        if constexpr (std::is_same_v<T, float>) {
            // Lane l's even pixel of the pair of lines, 2l: also its window's first column, less 2x.
            const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
            for (; x < g.ow; x += 16) {
                const index_t n = std::min<index_t>(16, g.ow - x);
                const __mmask16 lo = first_lanes(2 * n), hi = first_lanes(2 * n - 16);
                const auto take = [&](const T* r, const __m512i& which) {
                    return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo, r + 2 * x), which,
                                                  _mm512_maskz_loadu_ps(hi, r + 2 * x + 16));
                };
                __m512 best = take(r0, even);
                __m512i k = _mm512_setzero_si512();
                const auto consider = [&](__m512 v, std::int32_t offset) {
                    const __mmask16 b = _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q) &
                                        (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ));
                    best = _mm512_mask_mov_ps(best, b, v);
                    k = _mm512_mask_mov_epi32(k, b, _mm512_set1_epi32(offset));
                };
                consider(take(r0, odd), 1);
                consider(take(r1, even), w);
                consider(take(r1, odd), w + 1);
                const __mmask16 m = first_lanes(n);
                _mm512_mask_storeu_ps(o + x, m, best);
                const __m512i where = _mm512_add_epi32(_mm512_add_epi32(even, k),
                                                       _mm512_set1_epi32(base + static_cast<std::int32_t>(2 * x)));
                _mm512_mask_storeu_epi32(a + x, m, where);
            }
        }
#elif defined(__AVX2__)
        if constexpr (std::is_same_v<T, float>) {
            const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
            for (; x < g.ow; x += 8) {
                const index_t n = std::min<index_t>(8, g.ow - x);
                __m256 best, v;
                split_pairs(r0 + 2 * x, n, best, v);
                __m256i k = _mm256_setzero_si256();
                const auto consider = [&](__m256 next, std::int32_t offset) {
                    const __m256 b = _mm256_and_ps(_mm256_cmp_ps(best, best, _CMP_ORD_Q),
                                                   _mm256_or_ps(_mm256_cmp_ps(next, next, _CMP_UNORD_Q),
                                                                _mm256_cmp_ps(next, best, _CMP_GT_OQ)));
                    best = _mm256_blendv_ps(best, next, b);
                    k = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(k),
                                                             _mm256_castsi256_ps(_mm256_set1_epi32(offset)), b));
                };
                consider(v, 1);
                __m256 r, s;
                split_pairs(r1 + 2 * x, n, r, s);
                consider(r, w);
                consider(s, w + 1);
                const __m256i where = _mm256_add_epi32(_mm256_add_epi32(even, k),
                                                       _mm256_set1_epi32(base + static_cast<std::int32_t>(2 * x)));
                store_first(o + x, best, n);
                store_first(a + x, where, n);
            }
        }
#endif
        for (; x < g.ow; ++x) {
            const T p = r0[2 * x], q = r0[2 * x + 1], r = r1[2 * x], s = r1[2 * x + 1];
            T best = p;
            std::int32_t k = 0;
            bool b = better(q, best);
            best = b ? q : best;
            k = b ? 1 : k;
            b = better(r, best);
            best = b ? r : best;
            k = b ? w : k;
            b = better(s, best);
            best = b ? s : best;
            k = b ? w + 1 : k;
            o[x] = best;
            a[x] = base + static_cast<std::int32_t>(2 * x) + k;
        }
    }
}

// A 2x2 window at stride 2 without padding.
bool two_by_two(const Geometry& g) {
    return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1;
}

template <class T> void pool_any(const T* plane, T* out, std::int32_t* at, const Geometry& g) {
    for (index_t y = 0; y < g.oh; ++y)
        for (index_t x = 0; x < g.ow; ++x) {
            T best = -std::numeric_limits<T>::infinity();
            std::int32_t where = -1;
            bool first = true;
            for (index_t i = 0; i < g.kh; ++i) {
                const index_t iy = y * g.sh - g.ph + i * g.dh;
                for (index_t j = 0; j < g.kw; ++j) {
                    const index_t ix = x * g.sw - g.pw + j * g.dw;
                    // Padding is -infinity: it wins only as a window's first element.
                    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) {
                        first = false;
                        continue;
                    }
                    const T v = plane[iy * g.w + ix];
                    if (first || better(v, best)) {
                        best = v;
                        where = static_cast<std::int32_t>(iy * g.w + ix);
                    }
                    first = false;
                }
            }
            out[y * g.ow + x] = best;
            at[y * g.ow + x] = where;
        }
}

template <class T> void max_pool2d(const MaxPool2dCall& c) {
    const Geometry g = geometry(c.in, c.window);
    const T* in = c.in.as<const T>();
    T* out = c.out.as<T>();
    auto* at = c.indices.as<std::int32_t>();
    const index_t planes = g.n * g.c, outputs = g.positions();
    parallel_for(planes, planes * outputs * g.kh * g.kw >= (1 << 15), [&](index_t p) {
        const T* plane = in + p * g.h * g.w;
        if (two_by_two(g)) pool_2x2(plane, out + p * outputs, at + p * outputs, g);
        else pool_any(plane, out + p * outputs, at + p * outputs, g);
    });
}

// 2x2 windows at stride 2 that tile the plane: each pixel lies in one window,
// so each is written once (its window's gradient, or zero), no zeroing first;
// with vectors 16 (AVX-512) or 8 (AVX2) windows at a time, their four pixels'
// values interleaved back into the two lines by permutes.
template <class T> void unpool_2x2(T* plane, const T* d_out, const std::int32_t* at, const Geometry& g) {
    const auto w = static_cast<std::int32_t>(g.w);
    for (index_t y = 0; y < g.oh; ++y) {
        T* r0 = plane + 2 * y * g.w;
        T* r1 = r0 + g.w;
        const T* d = d_out + y * g.ow;
        const std::int32_t* a = at + y * g.ow;
        const auto base = static_cast<std::int32_t>(2 * y * g.w);
        index_t x = 0;
#if defined(__AVX512F__)
        if constexpr (std::is_same_v<T, float>) {
            // Lane l's window starts 2l columns on; low and high interleave two vectors' first and last 8 lanes.
            const __m512i lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            const __m512i low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            const __m512i high = _mm512_add_epi32(low, _mm512_set1_epi32(8));
            for (; x < g.ow; x += 16) {
                const index_t n = std::min<index_t>(16, g.ow - x);
                const __mmask16 m = first_lanes(n), lo = first_lanes(2 * n), hi = first_lanes(2 * n - 16);
                const __m512 grad = _mm512_maskz_loadu_ps(m, d + x);
                const __m512i k = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, a + x),
                                                   _mm512_add_epi32(lanes, _mm512_set1_epi32(base + static_cast<std::int32_t>(2 * x))));
                const auto at_offset = [&](std::int32_t offset) {
                    return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(offset)), grad);
                };
                const auto store_line = [&](T* line, __m512 even, __m512 odd) {
                    _mm512_mask_storeu_ps(line + 2 * x, lo, _mm512_permutex2var_ps(even, low, odd));
                    _mm512_mask_storeu_ps(line + 2 * x + 16, hi, _mm512_permutex2var_ps(even, high, odd));
                };
                store_line(r0, at_offset(0), at_offset(1));
                store_line(r1, at_offset(w), at_offset(w + 1));
            }
        }
#elif defined(__AVX2__)
        if constexpr (std::is_same_v<T, float>) {
            const __m256i lanes = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
            for (; x < g.ow; x += 8) {
                const index_t n = std::min<index_t>(8, g.ow - x);
                const __m256 grad = load_first(d + x, n);
                const __m256i k = _mm256_sub_epi32(
                    load_first(a + x, n), _mm256_add_epi32(lanes, _mm256_set1_epi32(base + static_cast<std::int32_t>(2 * x))));
                const auto at_offset = [&](std::int32_t offset) {
                    return _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(offset))), grad);
                };
                join_pairs(r0 + 2 * x, n, at_offset(0), at_offset(1));
                join_pairs(r1 + 2 * x, n, at_offset(w), at_offset(w + 1));
            }
        }
#endif
        for (; x < g.ow; ++x) {
            const std::int32_t k = a[x] - (base + static_cast<std::int32_t>(2 * x));
            r0[2 * x] = k == 0 ? d[x] : T(0);
            r0[2 * x + 1] = k == 1 ? d[x] : T(0);
            r1[2 * x] = k == w ? d[x] : T(0);
            r1[2 * x + 1] = k == w + 1 ? d[x] : T(0);
        }
    }
}

template <class T> void max_pool2d_backward(const MaxPool2dBackwardCall& c) {
    const Geometry g = geometry(c.d_in, c.window);
    const index_t planes = g.n * g.c, size = g.h * g.w, outputs = g.positions();
    const T* d_out = c.d_out.as<const T>();
    const auto* at = c.indices.as<const std::int32_t>();
    T* d_in = c.d_in.as<T>();
    const bool tiles = two_by_two(g) && g.h == 2 * g.oh && g.w == 2 * g.ow;
    parallel_for(planes, planes * (size + outputs) >= (1 << 15), [&](index_t p) {
        T* plane = d_in + p * size;
        if (tiles) return unpool_2x2(plane, d_out + p * outputs, at + p * outputs, g);
        std::fill(plane, plane + size, T(0));
        for (index_t k = p * outputs; k < (p + 1) * outputs; ++k)
            if (at[k] >= 0) plane[at[k]] += d_out[k];
    });
}

LEVERS_KERNEL(MaxPool2dCall, cpu, f32, max_pool2d<float>);
LEVERS_KERNEL(MaxPool2dCall, cpu, f64, max_pool2d<double>);
LEVERS_KERNEL(MaxPool2dBackwardCall, cpu, f32, max_pool2d_backward<float>);
LEVERS_KERNEL(MaxPool2dBackwardCall, cpu, f64, max_pool2d_backward<double>);

}  // namespace
}  // namespace levers::kernels::cpu

// The CPU's im2col and col2im a row at a time, shared by the unfold and fold
// kernels (cpu/conv.cpp) and by the fused convolution (cpu/conv2d.cpp), which
// unfolds one image into a thread's scratch rather than the whole batch.
#pragma once

#include "levers/kernels/common.hpp"
#include "levers/kernels/conv.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace levers::kernels::cpu {

// The geometry of one call, in plain numbers.
struct Geometry {
    index_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
    index_t positions() const { return oh * ow; }
    // A 1x1 window at stride 1 without padding: an image is its own columns.
    bool identity() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};
inline Geometry geometry(const TensorArg& image, const Window& win) {
    return {image.shape[0], image.shape[1], image.shape[2], image.shape[3], win.kernel[0], win.kernel[1],
            win.stride[0],  win.stride[1],  win.padding[0], win.padding[1], win.dilation[0], win.dilation[1],
            win.out_size(0, image.shape[2]), win.out_size(1, image.shape[3])};
}

#if defined(__AVX512F__)
// The first n lanes of 16 (none for n <= 0, all for n >= 16): a masked load or store's tail.
inline __mmask16 first_lanes(index_t n) {
    return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1);
}
#elif defined(__AVX2__)
// The first n lanes of 8 as a mask vector (all bits set in each lane taken): AVX2's masked loads and stores.
inline __m256i first_lanes(index_t n) {
    const auto k = static_cast<int>(std::clamp<index_t>(n, 0, 8));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// The first n lanes from src on, the rest zero (all 8 for n >= 8): a plain
// load when whole, else a masked one (which touches nothing past the first n).
inline __m256 load_first(const float* src, index_t n) {
    return n >= 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, first_lanes(n));
}
inline __m256i load_first(const std::int32_t* src, index_t n) {
    return n >= 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                  : _mm256_maskload_epi32(src, first_lanes(n));
}
// The first n lanes of v stored from dst on (all 8 for n >= 8): a part
// through a buffer, not a masked store (AMD's cores take several times a
// plain store's time for one).
inline void store_first(float* dst, __m256 v, index_t n) {
    if (n >= 8) return _mm256_storeu_ps(dst, v);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    std::copy_n(lanes, n, dst);
}
inline void store_first(std::int32_t* dst, __m256i v, index_t n) {
    if (n >= 8) return _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v);
    alignas(32) std::int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
    std::copy_n(lanes, n, dst);
}
#endif

// dst[k] = src[k] (Add: dst[k] += src[k]) for k in [0, n). The runs here are
// short (a line of a 14x14 map), too short for a compiler's vector loop, so
// vectors cover them, tail included (masked; under AVX2 the tail's store goes
// through a buffer, see store_first).
template <bool Add, class T> void line(T* dst, const T* src, index_t n) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) {
        for (index_t k = 0; k < n; k += 16) {
            const __mmask16 m = first_lanes(n - k);
            __m512 v = _mm512_maskz_loadu_ps(m, src + k);
            if constexpr (Add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, dst + k));
            _mm512_mask_storeu_ps(dst + k, m, v);
        }
        return;
    }
#elif defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>) {
        for (index_t k = 0; k < n; k += 8) {
            __m256 v = load_first(src + k, n - k);
            if constexpr (Add) v = _mm256_add_ps(v, load_first(dst + k, n - k));
            store_first(dst + k, v, n - k);
        }
        return;
    }
#endif
    for (index_t k = 0; k < n; ++k) dst[k] = Add ? dst[k] + src[k] : src[k];
}
template <class T> void fill_line(T* dst, T value, index_t n) {
    for (index_t k = 0; k < n; ++k) dst[k] = value;
}

// The outputs x in [first, end) of `outputs` whose input x·stride + offset lies inside [0, size): the loops
// below run over them without a test per element (a plain copy at stride 1), the edges apart.
struct Inside {
    index_t first, end;
};
inline Inside inside(index_t outputs, index_t stride, index_t offset, index_t size) {
    const index_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const index_t end = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
    const index_t lo = std::min(first, outputs);
    return {lo, std::clamp(end, lo, outputs)};
}

// At stride 1 with rows as wide as the image's (a "same" convolution's), the
// lines of one kernel offset's row follow one another as the image's do: the
// row is one shifted run of the plane, lines [y0, y1) of it inside the image,
// the pixels beyond each line's edges (read from the next line) then padded.
struct Run {
    index_t y0, y1;      // the lines whose input line lies inside the image
    index_t from, size;  // the run: the row's elements [y0·ow, y0·ow + size) take the plane's from `from` on
    index_t skip, keep;  // of those, the first `skip` and any past `keep` lie outside the plane
};
inline bool runs(const Geometry& g) { return g.sh == 1 && g.sw == 1 && g.ow == g.w; }
inline Run run_of(const Geometry& g, index_t i, index_t j) {
    const index_t y0 = std::clamp(g.ph - i * g.dh, index_t(0), g.oh);
    const index_t y1 = std::clamp(g.h + g.ph - i * g.dh, y0, g.oh);
    const index_t from = (y0 - g.ph + i * g.dh) * g.w + j * g.dw - g.pw, size = (y1 - y0) * g.ow;
    return {y0, y1, from, size, std::clamp(-from, index_t(0), size), std::clamp(g.h * g.w - from, index_t(0), size)};
}
// Sets the elements of lines [y0, y1) of a row that lie beyond the image's edges at offset j.
// (A column at a time: a pixel or two per line, where a fill per line would call memset.)
template <class T> void pad_edges(T* row, const Geometry& g, const Run& r, index_t j, T pad) {
    const Inside in_x = inside(g.ow, 1, j * g.dw - g.pw, g.w);
    const auto column = [&](index_t x) {
        for (index_t y = r.y0; y < r.y1; ++y) row[y * g.ow + x] = pad;
    };
    for (index_t x = 0; x < in_x.first; ++x) column(x);
    for (index_t x = in_x.end; x < g.ow; ++x) column(x);
}

// One row of columns: `plane`'s pixels at kernel offset (i, j), pad outside the image.
template <class T> void unfold_row(T* dst, const T* plane, const Geometry& g, index_t i, index_t j, T pad) {
    if (runs(g)) {
        const Run r = run_of(g, i, j);
        fill_line(dst, pad, r.y0 * g.ow);
        T* at = dst + r.y0 * g.ow;
        line<false>(at + r.skip, plane + r.from + r.skip, r.keep - r.skip);
        pad_edges(dst, g, r, j, pad);
        fill_line(dst + r.y1 * g.ow, pad, (g.oh - r.y1) * g.ow);
        return;
    }
    const index_t offset = j * g.dw - g.pw;
    const Inside in_x = inside(g.ow, g.sw, offset, g.w);
    for (index_t y = 0; y < g.oh; ++y) {
        const index_t iy = y * g.sh - g.ph + i * g.dh;
        T* out = dst + y * g.ow;
        if (iy < 0 || iy >= g.h) {
            fill_line(out, pad, g.ow);
            continue;
        }
        const T* src = plane + iy * g.w;
        fill_line(out, pad, in_x.first);
        if (g.sw == 1)
            line<false>(out + in_x.first, src + (in_x.first + offset), in_x.end - in_x.first);
        else
            for (index_t x = in_x.first; x < in_x.end; ++x) out[x] = src[x * g.sw + offset];
        fill_line(out + in_x.end, pad, g.ow - in_x.end);
    }
}

// `channels` consecutive planes as rows [channels·kh·kw, oh·ow].
template <class T> void unfold_planes(T* dst, const T* planes, const Geometry& g, index_t channels, T pad) {
    for (index_t ch = 0; ch < channels; ++ch)
        for (index_t i = 0; i < g.kh; ++i)
            for (index_t j = 0; j < g.kw; ++j)
                unfold_row(dst + ((ch * g.kh + i) * g.kw + j) * g.positions(), planes + ch * g.h * g.w, g, i, j, pad);
}

// One plane (written) from its kh·kw rows of columns, kernel offsets in order,
// so each pixel's sum is always the same.
template <class T> void fold_plane(T* plane, const T* rows, const Geometry& g) {
    fill_line(plane, T(0), g.h * g.w);
    for (index_t i = 0; i < g.kh; ++i)
        for (index_t j = 0; j < g.kw; ++j) {
            const T* src = rows + (i * g.kw + j) * g.positions();
            const index_t offset = j * g.dw - g.pw;
            const Inside in_x = inside(g.ow, g.sw, offset, g.w);
            for (index_t y = 0; y < g.oh; ++y) {
                const index_t iy = y * g.sh - g.ph + i * g.dh;
                if (iy < 0 || iy >= g.h) continue;
                T* dst = plane + iy * g.w;
                const T* cols = src + y * g.ow;
                if (g.sw == 1)
                    line<true>(dst + in_x.first + offset, cols + in_x.first, in_x.end - in_x.first);
                else
                    for (index_t x = in_x.first; x < in_x.end; ++x) dst[x * g.sw + offset] += cols[x];
            }
        }
}

// fold_plane for rows the caller no longer needs (a thread's scratch): at
// stride 1 each kernel offset's row is added as one run, its elements beyond
// the image's edges first set to zero (adding a zero leaves a pixel as it
// was, so every pixel's sum is fold_plane's, bit for bit).
template <class T> void fold_plane_consuming(T* plane, T* rows, const Geometry& g) {
    if (!runs(g)) return fold_plane(plane, rows, g);
    fill_line(plane, T(0), g.h * g.w);
    for (index_t i = 0; i < g.kh; ++i)
        for (index_t j = 0; j < g.kw; ++j) {
            T* row = rows + (i * g.kw + j) * g.positions();
            const Run r = run_of(g, i, j);
            pad_edges(row, g, r, j, T(0));
            T* at = row + r.y0 * g.ow;
            line<true>(plane + r.from + r.skip, at + r.skip, r.keep - r.skip);
        }
}

}  // namespace levers::kernels::cpu

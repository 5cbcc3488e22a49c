// unfold (im2col) and fold (col2im) on the CPU (levers/kernels/conv.hpp).
#include "levers/kernels/conv.hpp"

#include "levers/kernels/common.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"

#include <algorithm>

namespace levers::kernels::cpu {

namespace {

// The geometry of one call, in plain numbers.
struct Geometry {
    index_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};
Geometry geometry(const TensorArg& image, const Window& win) {
    return {image.shape[0], image.shape[1], image.shape[2], image.shape[3], win.kernel[0], win.kernel[1],
            win.stride[0],  win.stride[1],  win.padding[0], win.padding[1], win.dilation[0], win.dilation[1],
            win.out_size(0, image.shape[2]), win.out_size(1, image.shape[3])};
}

// The outputs x in [first, end) of `outputs` whose input x·stride + offset lies inside [0, size): the loops
// below run over them without a test per element (a plain copy at stride 1), the edges apart.
struct Inside {
    index_t first, end;
};
Inside inside(index_t outputs, index_t stride, index_t offset, index_t size) {
    const index_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const index_t end = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
    const index_t lo = std::min(first, outputs);
    return {lo, std::clamp(end, lo, outputs)};
}

template <class T> void unfold(const UnfoldCall& c) {
    const Geometry g = geometry(c.in, c.window);
    const T* in = c.in.as<const T>();
    T* out = c.out.as<T>();
    const T pad = static_cast<T>(c.pad_value);
    const index_t rows = g.n * g.c * g.kh * g.kw, positions = g.oh * g.ow;
    // One row of out per task: a channel's pixels at one kernel offset.
    parallel_for(rows, rows * positions >= (1 << 15), [&](index_t row) {
        const index_t j = row % g.kw, i = row / g.kw % g.kh, ch = row / (g.kw * g.kh);  // ch: n·C + c
        const T* plane = in + ch * g.h * g.w;
        T* dst = out + row * positions;
        for (index_t y = 0; y < g.oh; ++y) {
            const index_t iy = y * g.sh - g.ph + i * g.dh;
            T* line = dst + y * g.ow;
            if (iy < 0 || iy >= g.h) {
                std::fill(line, line + g.ow, pad);
                continue;
            }
            const index_t offset = j * g.dw - g.pw;
            const T* src = plane + iy * g.w;
            const Inside in_x = inside(g.ow, g.sw, offset, g.w);
            std::fill(line, line + in_x.first, pad);
            if (g.sw == 1)
                std::copy(src + (in_x.first + offset), src + (in_x.end + offset), line + in_x.first);
            else
                for (index_t x = in_x.first; x < in_x.end; ++x) line[x] = src[x * g.sw + offset];
            std::fill(line + in_x.end, line + g.ow, pad);
        }
    });
}

template <class T> void fold(const FoldCall& c) {
    const Geometry g = geometry(c.out, c.window);
    const T* in = c.in.as<const T>();
    T* out = c.out.as<T>();
    const index_t planes = g.n * g.c, positions = g.oh * g.ow;
    // One image plane per task: its kernel offsets in order, so each pixel's sum is always the same.
    parallel_for(planes, planes * g.kh * g.kw * positions >= (1 << 15), [&](index_t p) {
        T* plane = out + p * g.h * g.w;
        std::fill(plane, plane + g.h * g.w, T(0));
        for (index_t i = 0; i < g.kh; ++i)
            for (index_t j = 0; j < g.kw; ++j) {
                const T* src = in + ((p * g.kh + i) * g.kw + j) * positions;
                const index_t offset = j * g.dw - g.pw;
                const Inside in_x = inside(g.ow, g.sw, offset, g.w);
                for (index_t y = 0; y < g.oh; ++y) {
                    const index_t iy = y * g.sh - g.ph + i * g.dh;
                    if (iy < 0 || iy >= g.h) continue;
                    T* dst = plane + iy * g.w;
                    const T* line = src + y * g.ow;
                    if (g.sw == 1) {
#pragma omp simd
                        for (index_t x = in_x.first; x < in_x.end; ++x) dst[x + offset] += line[x];
                    } else {
                        for (index_t x = in_x.first; x < in_x.end; ++x) dst[x * g.sw + offset] += line[x];
                    }
                }
            }
    });
}

LEVERS_KERNEL(UnfoldCall, cpu, f32, unfold<float>);
LEVERS_KERNEL(UnfoldCall, cpu, f64, unfold<double>);
LEVERS_KERNEL(FoldCall, cpu, f32, fold<float>);
LEVERS_KERNEL(FoldCall, cpu, f64, fold<double>);

}  // namespace
}  // namespace levers::kernels::cpu

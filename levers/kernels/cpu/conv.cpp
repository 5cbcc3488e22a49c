// unfold (im2col) and fold (col2im) on the CPU (levers/kernels/conv.hpp).
#include "levers/kernels/conv.hpp"

#include "levers/kernels/cpu/im2col.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"

namespace levers::kernels::cpu {

namespace {

template <class T> void unfold(const UnfoldCall& c) {
    const Geometry g = geometry(c.in, c.window);
    const T* in = c.in.as<const T>();
    T* out = c.out.as<T>();
    const T pad = static_cast<T>(c.pad_value);
    const index_t rows = g.n * g.c * g.kh * g.kw, positions = g.positions();
    // One row of out per task: a channel's pixels at one kernel offset.
    parallel_for(rows, rows * positions >= (1 << 15), [&](index_t row) {
        const index_t j = row % g.kw, i = row / g.kw % g.kh, ch = row / (g.kw * g.kh);  // ch: n·C + c
        unfold_row(out + row * positions, in + ch * g.h * g.w, g, i, j, pad);
    });
}

template <class T> void fold(const FoldCall& c) {
    const Geometry g = geometry(c.out, c.window);
    const T* in = c.in.as<const T>();
    T* out = c.out.as<T>();
    const index_t planes = g.n * g.c, positions = g.positions();
    // One image plane per task.
    parallel_for(planes, planes * g.kh * g.kw * positions >= (1 << 15), [&](index_t p) {
        fold_plane(out + p * g.h * g.w, in + p * g.kh * g.kw * positions, g);
    });
}

LEVERS_KERNEL(UnfoldCall, cpu, f32, unfold<float>);
LEVERS_KERNEL(UnfoldCall, cpu, f64, unfold<double>);
LEVERS_KERNEL(FoldCall, cpu, f32, fold<float>);
LEVERS_KERNEL(FoldCall, cpu, f64, fold<double>);

}  // namespace
}  // namespace levers::kernels::cpu

// conv2d and its backward fused on the CPU (levers/kernels/conv.hpp): an image
// at a time, its receptive fields unfolded into the thread's scratch (a few
// hundred KB at most for the usual shapes, so it stays in cache) and
// multiplied there against the weights through OpenBLAS. The batch's columns
// are never written to memory, nor kept for backward, which unfolds each
// image again. Weight and bias gradients are summed per chunk of images
// (a fixed split, whatever the thread count) and the chunks added in order,
// so the result is the same on any number of threads.
#include "levers/kernels/conv.hpp"

#include "levers/core/storage_pool.hpp"
#include "levers/kernels/cpu/eigen_maps.hpp"
#include "levers/kernels/cpu/im2col.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"
#include "levers/kernels/cpu/thread_scratch.hpp"

namespace levers::kernels::cpu {

namespace {

// The sizes of one group's product.
struct Product {
    index_t groups, cg, og, field, positions;  // cg, og: channels in and out per group; field = cg·kh·kw
};
Product product_of(const Geometry& g, const TensorArg& weight, index_t groups) {
    const index_t og = weight.shape[0] / groups, cg = g.c / groups;
    return {groups, cg, og, cg * g.kh * g.kw, g.positions()};
}

// Image n's group gr as columns [field, positions]: the image itself for a 1x1 window, else `scratch`.
template <class T>
const T* columns(const T* in, index_t n, index_t gr, const Geometry& g, const Product& p, T* scratch) {
    const T* planes = in + (n * g.c + gr * p.cg) * g.h * g.w;
    if (g.identity()) return planes;
    unfold_planes(scratch, planes, g, p.cg, T(0));
    return scratch;
}

template <class T> void conv2d(const Conv2dCall& c) {
    const Geometry g = geometry(c.in, c.window);
    const Product p = product_of(g, c.weight, c.groups);
    const T *in = c.in.as<const T>(), *weight = c.weight.as<const T>(), *bias = c.bias.as<const T>();
    T* out = c.out.as<T>();
    const ThreadScratch<T> scratch(static_cast<std::size_t>(g.identity() ? 0 : p.field * p.positions));
    const index_t items = g.n * p.groups;
    parallel_for(items, items * p.og * p.field * p.positions >= (1 << 16), [&](index_t item) {
        const index_t n = item / p.groups, gr = item % p.groups;
        const T* cols = columns(in, n, gr, g, p, scratch.mine());
        MatMap<T> y(out + (n * p.groups + gr) * p.og * p.positions, p.og, p.positions);
        y.noalias() = ConstMatMap<T>(weight + gr * p.og * p.field, p.og, p.field) *
                      ConstMatMap<T>(cols, p.field, p.positions);
        if (bias) y.colwise() += ConstColVecMap<T>(bias + gr * p.og, p.og);
    });
}

// At most this many chunks of images for the weight and bias gradients' partial sums.
constexpr index_t kChunks = 16;

template <class T> void conv2d_backward(const Conv2dBackwardCall& c) {
    const Geometry g = geometry(c.in, c.window);
    const Product p = product_of(g, c.weight, c.groups);
    const T *in = c.in.as<const T>(), *weight = c.weight.as<const T>(), *d_out = c.d_out.as<const T>();
    T *d_in = c.d_in.as<T>(), *d_weight = c.d_weight.as<T>(), *d_bias = c.d_bias.as<T>();
    const index_t o = p.groups * p.og, weights = o * p.field;
    const index_t per_chunk = (g.n + kChunks - 1) / kChunks, chunks = (g.n + per_chunk - 1) / per_chunk;
    // Per chunk: its weight gradient, then its bias gradient.
    const index_t partial = (d_weight ? weights : 0) + (d_bias ? o : 0);
    const std::shared_ptr<std::byte> partials = cpu_pool().take(static_cast<std::size_t>(chunks * partial) * sizeof(T));
    // Per thread: one image's columns, then their gradient.
    const index_t cols_size = g.identity() ? 0 : p.field * p.positions;
    const ThreadScratch<T> scratch(static_cast<std::size_t>(2 * cols_size));
    parallel_for(chunks, g.n * o * p.field * p.positions >= (1 << 16), [&](index_t chunk) {
        T* pw = reinterpret_cast<T*>(partials.get()) + chunk * partial;
        T* pb = pw + (d_weight ? weights : 0);
        T* cols_scratch = scratch.mine();
        T* d_cols_scratch = cols_scratch + cols_size;
        const index_t first = chunk * per_chunk, end = std::min(g.n, first + per_chunk);
        for (index_t n = first; n < end; ++n) {
            for (index_t gr = 0; gr < p.groups; ++gr) {
                ConstMatMap<T> dy(d_out + (n * p.groups + gr) * p.og * p.positions, p.og, p.positions);
                ConstMatMap<T> w(weight + gr * p.og * p.field, p.og, p.field);
                if (d_weight) {
                    ConstMatMap<T> cols(columns(in, n, gr, g, p, cols_scratch), p.field, p.positions);
                    MatMap<T> dw(pw + gr * p.og * p.field, p.og, p.field);
                    if (n == first) dw.noalias() = dy * cols.transpose();
                    else dw.noalias() += dy * cols.transpose();
                }
                if (d_bias) {
                    ColVecMap<T> db(pb + gr * p.og, p.og);
                    if (n == first) db = dy.rowwise().sum();
                    else db += dy.rowwise().sum();
                }
                if (d_in) {
                    T* planes = d_in + (n * g.c + gr * p.cg) * g.h * g.w;
                    if (g.identity()) {
                        MatMap<T>(planes, p.field, p.positions).noalias() = w.transpose() * dy;
                    } else {
                        MatMap<T>(d_cols_scratch, p.field, p.positions).noalias() = w.transpose() * dy;
                        const index_t rows = g.kh * g.kw * p.positions;
                        for (index_t ch = 0; ch < p.cg; ++ch)
                            fold_plane_consuming(planes + ch * g.h * g.w, d_cols_scratch + ch * rows, g);
                    }
                }
            }
        }
    });
    // The chunks' sums added in order.
    for (index_t chunk = 0; chunk < chunks; ++chunk) {
        const T* pw = reinterpret_cast<const T*>(partials.get()) + chunk * partial;
        if (d_weight) ColVecMap<T>(d_weight, weights) += ConstColVecMap<T>(pw, weights);
        if (d_bias) ColVecMap<T>(d_bias, o) += ConstColVecMap<T>(pw + (d_weight ? weights : 0), o);
    }
}

LEVERS_KERNEL(Conv2dCall, cpu, f32, conv2d<float>);
LEVERS_KERNEL(Conv2dCall, cpu, f64, conv2d<double>);
LEVERS_KERNEL(Conv2dBackwardCall, cpu, f32, conv2d_backward<float>);
LEVERS_KERNEL(Conv2dBackwardCall, cpu, f64, conv2d_backward<double>);

}  // namespace
}  // namespace levers::kernels::cpu

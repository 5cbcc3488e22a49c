// unfold (im2col) and fold (col2im) on the GPU (levers/kernels/conv.hpp): a thread
// per column element for unfold; a thread per image pixel for fold, which
// adds the columns that took it, kernel offsets in order (no atomics).
#include "levers/kernels/conv.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

struct Geometry {
    index_t c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};
Geometry geometry(const TensorArg& image, const Window& win) {
    return {image.shape[1],  image.shape[2],  image.shape[3],  win.kernel[0],   win.kernel[1],
            win.stride[0],   win.stride[1],   win.padding[0],  win.padding[1],  win.dilation[0],
            win.dilation[1], win.out_size(0, image.shape[2]), win.out_size(1, image.shape[3])};
}

template <class S> __global__ void unfold_kernel(S* out, const S* in, Geometry g, index_t n, acc_t<S> pad) {
    const index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (e >= n) return;
    // e = ((ch·kh + i)·kw + j)·L + y·ow + x, ch = image·C + channel.
    const index_t x = e % g.ow, y = e / g.ow % g.oh, j = e / (g.ow * g.oh) % g.kw, i = e / (g.ow * g.oh * g.kw) % g.kh,
                  ch = e / (g.ow * g.oh * g.kw * g.kh);
    const index_t iy = y * g.sh - g.ph + i * g.dh, ix = x * g.sw - g.pw + j * g.dw;
    out[e] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? in[(ch * g.h + iy) * g.w + ix] : store<S>(pad);
}

template <class S> __global__ void fold_kernel(S* out, const S* in, Geometry g, index_t n) {
    const index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (e >= n) return;
    const index_t ix = e % g.w, iy = e / g.w % g.h, ch = e / (g.w * g.h);
    const index_t positions = g.oh * g.ow;
    acc_t<S> sum = 0;
    for (index_t i = 0; i < g.kh; ++i) {
        const index_t ty = iy + g.ph - i * g.dh;  // = y · sh for the output row y that read it
        if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.oh) continue;
        for (index_t j = 0; j < g.kw; ++j) {
            const index_t tx = ix + g.pw - j * g.dw;
            if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.ow) continue;
            sum += load(in[((ch * g.kh + i) * g.kw + j) * positions + (ty / g.sh) * g.ow + tx / g.sw]);
        }
    }
    out[e] = store<S>(sum);
}

template <class S> void unfold_call(const UnfoldCall& c) {
    const index_t n = c.out.numel();
    if (n == 0) return;
    LEVERS_LAUNCH(unfold_kernel<S><<<blocks_for(n, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<const S>(c.in), geometry(c.in, c.window), n, static_cast<acc_t<S>>(c.pad_value)));
}
template <class S> void fold_call(const FoldCall& c) {
    const index_t n = c.out.numel();
    if (n == 0) return;
    LEVERS_LAUNCH(fold_kernel<S><<<blocks_for(n, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<const S>(c.in), geometry(c.out, c.window), n));
}
LEVERS_CUDA_KERNELS(UnfoldCall, unfold_call);
LEVERS_CUDA_KERNELS(FoldCall, fold_call);

}  // namespace
}  // namespace levers::kernels::cuda

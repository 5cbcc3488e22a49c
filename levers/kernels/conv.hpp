// Convolutions and pooling over images [N, C, H, W] (or one image [C, H, W]),
// differentiable, made on every backend of one pair of kernels: "unfold"
// (im2col: each output position's receptive field as a column) and its
// adjoint "fold" (col2im: columns summed back into the image). conv2d is
// unfold then one batched matmul against the weights (stride, padding,
// dilation and groups as PyTorch's); max_pool2d and avg_pool2d reduce the
// unfolded windows. Where a backend has them (the CPU), conv2d and
// max_pool2d run fused kernels instead, which never write the batch's
// columns: a convolution unfolds one image at a time into cache and
// multiplies it there; max-pooling keeps each window's winner. The kernels
// read contiguous images: the ops make them so.
#pragma once

#include "levers/core/kernel.hpp"

#include <array>
#include <cstdint>

namespace levers {

// A window's geometry, per spatial dimension (height, width).
struct Window {
    std::array<std::int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
    // Positions along dimension i of an input of `size`.
    std::int64_t out_size(int i, std::int64_t size) const {
        const auto u = static_cast<std::size_t>(i);
        return (size + 2 * padding[u] - dilation[u] * (kernel[u] - 1) - 1) / stride[u] + 1;
    }
};

// "unfold": out [N, C·kh·kw, L] (L = out_h · out_w) from in [N, C, H, W];
// out[n, (c·kh + i)·kw + j, y·out_w + x] = in[n, c, y·sh - ph + i·dh, x·sw - pw + j·dw],
// or pad_value outside the image.
struct UnfoldCall : KernelCallBase {
    static constexpr const char* kName = "unfold";
    TensorArg out, in;
    Window window;
    double pad_value = 0;
};
// "fold": out [N, C, H, W] (written) = the sum of in [N, C·kh·kw, L]'s
// columns where unfold took them from, each pixel's terms in a fixed order.
struct FoldCall : KernelCallBase {
    static constexpr const char* kName = "fold";
    TensorArg out, in;
    Window window;
};

// "conv2d": out [N, O, oh, ow] (written) = in [N, C, H, W] convolved with
// weight [O, C / groups, kh, kw], plus bias [O] (optional).
struct Conv2dCall : KernelCallBase {
    static constexpr const char* kName = "conv2d";
    TensorArg out, in, weight, bias;
    Window window;
    std::int64_t groups = 1;
};
// "conv2d_backward": d_in (optional, written), d_weight and d_bias (optional,
// added to) from d_out; each image's columns unfolded again from in.
struct Conv2dBackwardCall : KernelCallBase {
    static constexpr const char* kName = "conv2d_backward";
    TensorArg d_in, d_weight, d_bias, d_out, in, weight;
    Window window;
    std::int64_t groups = 1;
};
// "max_pool2d": out [N, C, oh, ow] (written), each window's largest element
// (padding as -infinity; NaN wins; the first of equals), and where it lies
// in its plane, indices [N, C, oh, ow] (i32, y·W + x; -1 for a window of
// padding alone).
struct MaxPool2dCall : KernelCallBase {
    static constexpr const char* kName = "max_pool2d";
    TensorArg out, indices, in;
    Window window;
};
// "max_pool2d_backward": d_in [N, C, H, W] (written) = each output's
// gradient added where its index points, outputs in order.
struct MaxPool2dBackwardCall : KernelCallBase {
    static constexpr const char* kName = "max_pool2d_backward";
    TensorArg d_in, d_out, indices;
    Window window;  // the forward's
};

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

using Pair = std::array<std::int64_t, 2>;

// The receptive fields of x [N, C, H, W] as columns: [N, C·kh·kw, L]
// (torch.nn.functional.unfold), with `pad_value` beyond the edges.
Tensor unfold(const Tensor& x, Pair kernel, Pair dilation = {1, 1}, Pair padding = {0, 0}, Pair stride = {1, 1},
              double pad_value = 0);
// Its adjoint: columns [N, C·kh·kw, L] summed into images [N, C, size_h, size_w].
Tensor fold(const Tensor& cols, Pair size, Pair kernel, Pair dilation = {1, 1}, Pair padding = {0, 0},
            Pair stride = {1, 1});

// x [N, C, H, W] with weight [O, C / groups, kh, kw] and bias [O] (optional):
// [N, O, out_h, out_w], each group of C / groups input channels making O / groups outputs.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Pair stride = {1, 1},
              Pair padding = {0, 0}, Pair dilation = {1, 1}, std::int64_t groups = 1);
// The largest element of each window (padding counts as -infinity; the
// gradient goes to the first largest); stride 0 means the kernel's size.
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0}, Pair dilation = {1, 1});
// The mean of each window, padding counted as zeros (PyTorch's count_include_pad).
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});

}  // namespace levers::ops
#endif  // !__CUDACC__

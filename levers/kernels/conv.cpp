#include "levers/kernels/conv.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/matmul.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/core/dispatch.hpp"

#include <limits>

namespace levers::ops {

namespace {

Window window_of(const char* op, Pair kernel, Pair stride, Pair padding, Pair dilation) {
    for (int i = 0; i < 2; ++i) {
        const auto u = static_cast<std::size_t>(i);
        LEVERS_CHECK(kernel[u] >= 1 && stride[u] >= 1 && dilation[u] >= 1 && padding[u] >= 0,
                     "{}: kernel {}x{}, stride {}x{}, dilation {}x{} must be >= 1 and padding {}x{} >= 0", op,
                     kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1], padding[0], padding[1]);
    }
    return {kernel, stride, padding, dilation};
}

// x as [N, C, H, W] (one image [C, H, W] gains a batch of one); `batched` says which it was.
Tensor as_batch(const char* op, const Tensor& x, bool& batched) {
    check_float(op, "x", x);
    LEVERS_CHECK(x.ndim() == 3 || x.ndim() == 4, "{}: 'x' is {}, expected [N, C, H, W] or [C, H, W]", op, describe(x));
    batched = x.ndim() == 4;
    return batched ? x : x.unsqueeze(0);
}

// The output size of `w` over x [N, C, H, W], refusing a window larger than the padded image.
Pair out_sizes(const char* op, const Tensor& x, const Window& w) {
    Pair out{w.out_size(0, x.dim(2)), w.out_size(1, x.dim(3))};
    LEVERS_CHECK(out[0] >= 1 && out[1] >= 1,
                 "{}: a {}x{} window (dilation {}x{}) does not fit a {}x{} image with padding {}x{}", op, w.kernel[0],
                 w.kernel[1], w.dilation[0], w.dilation[1], x.dim(2), x.dim(3), w.padding[0], w.padding[1]);
    return out;
}

Tensor run_unfold(const Tensor& image, const Window& w, double pad_value);
Tensor run_fold(const Tensor& cols, const Shape& image, const Window& w);

struct WindowSaved {
    Window window;
    Shape image;  // unfold's: the image's shape, which its gradient takes
};

Tensor run_unfold(const Tensor& image_in, const Window& w, double pad_value) {
    const Tensor image = image_in.contiguous();
    const Pair out = out_sizes("unfold", image, w);
    const std::int64_t n = image.dim(0), c = image.dim(1);
    Tensor cols = Tensor::empty({n, c * w.kernel[0] * w.kernel[1], out[0] * out[1]}, image.dtype(), image.device());
    UnfoldCall call{.out = arg(cols), .in = arg(image), .window = w, .pad_value = pad_value};
    run(image, call);
    if (auto* s = autograd::record<WindowSaved>(
            "unfold",
            [](autograd::Backward& g, const WindowSaved& s) { g.set_grad(0, run_fold(g.grad_out(), s.image, s.window)); },
            {&image}, {&cols}))
        *s = {w, image.shape()};
    return cols;
}

Tensor run_fold(const Tensor& cols_in, const Shape& image_shape, const Window& w) {
    const Tensor cols = cols_in.contiguous();
    Tensor image = Tensor::empty(image_shape, cols.dtype(), cols.device());
    FoldCall call{.out = arg(image), .in = arg(cols), .window = w};
    run(cols, call);
    if (auto* s = autograd::record<WindowSaved>(
            "fold",
            [](autograd::Backward& g, const WindowSaved& s) {
                // unfold's pad value does not matter here: padding has no gradient.
                g.set_grad(0, run_unfold(g.grad_out(), s.window, 0));
            },
            {&cols}, {&image}))
        s->window = w;
    return image;
}

struct ConvSaved {
    autograd::SavedTensor x, weight;
    Window window;
    std::int64_t groups = 1;
};

// The fused convolution (the backend's conv2d kernels): y [N, O, out].
Tensor run_conv2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const Window& w,
                  std::int64_t groups, Pair out) {
    const Tensor x = x_in.contiguous(), weight = weight_in.contiguous(), bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
    Tensor y = Tensor::empty({x.dim(0), weight.dim(0), out[0], out[1]}, x.dtype(), x.device());
    Conv2dCall call{.out = arg(y), .in = arg(x), .weight = arg(weight), .bias = arg(bias), .window = w, .groups = groups};
    run(x, call);
    if (auto* s = autograd::record<ConvSaved>(
            "conv2d",
            [](autograd::Backward& g, const ConvSaved& s) {
                const Tensor d_x = g.needs_grad(0) ? g.write_grad(0) : Tensor();
                const Tensor d_w = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                const Tensor d_b = g.needs_grad(2) ? g.add_grad(2) : Tensor();
                if (!d_x.defined() && !d_w.defined() && !d_b.defined()) return;
                const Tensor d_y = g.grad_out().contiguous();
                Conv2dBackwardCall back{.d_in = arg(d_x), .d_weight = arg(d_w), .d_bias = arg(d_b), .d_out = arg(d_y),
                                        .in = arg(s.x), .weight = arg(s.weight), .window = s.window, .groups = s.groups};
                run(d_y, back);
            },
            {&x, &weight, &bias}, {&y}))
        *s = {.x = x, .weight = weight, .window = w, .groups = groups};
    return y;
}

struct PoolSaved {
    autograd::SavedTensor indices;
    Window window;
};

// The fused max-pooling (the backend's max_pool2d kernels): y [N, C, out].
Tensor run_max_pool2d(const Tensor& x_in, const Window& w, Pair out) {
    const Tensor x = x_in.contiguous();
    const Shape shape{x.dim(0), x.dim(1), out[0], out[1]};
    Tensor y = Tensor::empty(shape, x.dtype(), x.device());
    Tensor indices = Tensor::empty(shape, DType::i32, x.device());
    MaxPool2dCall call{.out = arg(y), .indices = arg(indices), .in = arg(x), .window = w};
    run(x, call);
    if (auto* s = autograd::record<PoolSaved>(
            "max_pool2d",
            [](autograd::Backward& g, const PoolSaved& s) {
                const Tensor d_y = g.grad_out().contiguous();
                MaxPool2dBackwardCall back{
                    .d_in = arg(g.write_grad(0)), .d_out = arg(d_y), .indices = arg(s.indices), .window = s.window};
                run(d_y, back);
            },
            {&x}, {&y}))
        *s = {.indices = indices, .window = w};
    return y;
}

}  // namespace

Tensor unfold(const Tensor& x_in, Pair kernel, Pair dilation, Pair padding, Pair stride, double pad_value) {
    bool batched = true;
    const Tensor x = as_batch("unfold", x_in, batched);
    const Tensor cols = run_unfold(x, window_of("unfold", kernel, stride, padding, dilation), pad_value);
    return batched ? cols : cols.squeeze(0);
}

Tensor fold(const Tensor& cols_in, Pair size, Pair kernel, Pair dilation, Pair padding, Pair stride) {
    check_float("fold", "cols", cols_in);
    LEVERS_CHECK(cols_in.ndim() == 2 || cols_in.ndim() == 3, "fold: 'cols' is {}, expected [N, C·kh·kw, L]",
                 describe(cols_in));
    const bool batched = cols_in.ndim() == 3;
    const Tensor cols = batched ? cols_in : cols_in.unsqueeze(0);
    const Window w = window_of("fold", kernel, stride, padding, dilation);
    const std::int64_t field = kernel[0] * kernel[1];
    LEVERS_CHECK(size[0] >= 1 && size[1] >= 1 && w.out_size(0, size[0]) >= 1 && w.out_size(1, size[1]) >= 1,
                 "fold: a {}x{} window does not fit a {}x{} image", kernel[0], kernel[1], size[0], size[1]);
    const std::int64_t positions = w.out_size(0, size[0]) * w.out_size(1, size[1]);
    LEVERS_CHECK(cols.dim(1) % field == 0 && cols.dim(2) == positions,
                 "fold: 'cols' is {}, but a {}x{} window over a {}x{} image needs [N, C·{}, {}]", describe(cols_in),
                 kernel[0], kernel[1], size[0], size[1], field, positions);
    const Tensor image = run_fold(cols, Shape{cols.dim(0), cols.dim(1) / field, size[0], size[1]}, w);
    return batched ? image : image.squeeze(0);
}

Tensor conv2d(const Tensor& x_in, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation,
              std::int64_t groups) {
    bool batched = true;
    const Tensor x = as_batch("conv2d", x_in, batched);
    check_like("conv2d", "weight", weight, "x", x);
    LEVERS_CHECK(weight.ndim() == 4, "conv2d: 'weight' is {}, expected [out_channels, in_channels / groups, kh, kw]",
                 describe(weight));
    LEVERS_CHECK(groups >= 1, "conv2d: groups must be >= 1, got {}", groups);
    const std::int64_t n = x.dim(0), c = x.dim(1), o = weight.dim(0);
    LEVERS_CHECK(c % groups == 0 && o % groups == 0 && weight.dim(1) * groups == c,
                 "conv2d: 'x' has {} channels and 'weight' is {}: with {} groups it needs [O, {}, kh, kw], O a "
                 "multiple of {}",
                 c, weight.shape().str(), groups, c / std::max<std::int64_t>(groups, 1), groups);
    if (bias.defined()) {
        check_like("conv2d", "bias", bias, "x", x);
        LEVERS_CHECK(bias.shape() == Shape{o}, "conv2d: 'bias' is {}, expected [{}]", describe(bias), o);
    }
    const Window w = window_of("conv2d", {weight.dim(2), weight.dim(3)}, stride, padding, dilation);
    const Pair out = out_sizes("conv2d", x, w);
    if (has_kernel(Conv2dCall::kName, x.device().kind, x.dtype())) {
        const Tensor y = run_conv2d(x, weight, bias, w, groups, out);
        return batched ? y : y.squeeze(0);
    }
    const std::int64_t field = weight.dim(1) * w.kernel[0] * w.kernel[1];
    // [N, G, C/G·kh·kw, L] against [G, O/G, C/G·kh·kw]: one product per image and group.
    const Tensor cols = run_unfold(x, w, 0).view({n, groups, field, out[0] * out[1]});
    const Tensor kernels = weight.reshape({groups, o / groups, field});
    Tensor y = matmul(kernels, cols).view({n, o, out[0], out[1]});
    if (bias.defined()) y = add(y, bias.view({1, o, 1, 1}));
    return batched ? y : y.squeeze(0);
}

Tensor max_pool2d(const Tensor& x_in, Pair kernel, Pair stride, Pair padding, Pair dilation) {
    bool batched = true;
    const Tensor x = as_batch("max_pool2d", x_in, batched);
    if (stride == Pair{0, 0}) stride = kernel;
    const Window w = window_of("max_pool2d", kernel, stride, padding, dilation);
    LEVERS_CHECK(padding[0] * 2 <= kernel[0] && padding[1] * 2 <= kernel[1],
                 "max_pool2d: padding {}x{} must be at most half the kernel {}x{}", padding[0], padding[1], kernel[0],
                 kernel[1]);
    const Pair out = out_sizes("max_pool2d", x, w);
    const std::int64_t n = x.dim(0), c = x.dim(1);
    if (has_kernel(MaxPool2dCall::kName, x.device().kind, x.dtype())) {
        const Tensor y = run_max_pool2d(x, w, out);
        return batched ? y : y.squeeze(0);
    }
    // Each channel a one-channel image, its windows as columns, the largest of each column.
    const Tensor cols = run_unfold(x.reshape({n * c, 1, x.dim(2), x.dim(3)}), w, -std::numeric_limits<double>::infinity());
    const Tensor y = max(cols, 1).values.view({n, c, out[0], out[1]});
    return batched ? y : y.squeeze(0);
}

Tensor avg_pool2d(const Tensor& x_in, Pair kernel, Pair stride, Pair padding) {
    bool batched = true;
    const Tensor x = as_batch("avg_pool2d", x_in, batched);
    if (stride == Pair{0, 0}) stride = kernel;
    const Window w = window_of("avg_pool2d", kernel, stride, padding, {1, 1});
    LEVERS_CHECK(padding[0] * 2 <= kernel[0] && padding[1] * 2 <= kernel[1],
                 "avg_pool2d: padding {}x{} must be at most half the kernel {}x{}", padding[0], padding[1], kernel[0],
                 kernel[1]);
    const Pair out = out_sizes("avg_pool2d", x, w);
    const std::int64_t n = x.dim(0), c = x.dim(1);
    const Tensor cols = run_unfold(x.reshape({n * c, 1, x.dim(2), x.dim(3)}), w, 0);
    const Tensor y = mean(cols, {1}).view({n, c, out[0], out[1]});
    return batched ? y : y.squeeze(0);
}

}  // namespace levers::ops

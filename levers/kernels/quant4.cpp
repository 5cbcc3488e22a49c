// The 4-bit ops (levers/kernels/quant4.hpp): quantizing where the weight
// lives, the absmax' own 8-bit quantization on the host, dequantizing a
// rectangle, and the linear layer over a 4-bit weight in tiles.
#include "levers/kernels/quant4.hpp"

#include "levers/core/shape_trace.hpp"
#include "levers/kernels/linear.hpp"
#include "levers/kernels/lora.hpp"
#include "levers/kernels/matmul.hpp"

#include <algorithm>

namespace levers::ops {

std::string_view name_of(Quant4Type t) { return t == Quant4Type::nf4 ? "nf4" : "fp4"; }

Quant4Type quant4_type(std::string_view name, std::string_view where) {
    if (name == "nf4") return Quant4Type::nf4;
    if (name == "fp4") return Quant4Type::fp4;
    LEVERS_FAIL("{}: unknown 4-bit type '{}'; valid are nf4 and fp4", where, name);
}

std::int64_t Quantized4::blocks() const { return (shape.numel() + blocksize - 1) / blocksize; }

Quantized4 Quantized4::to(Device device) const { return device == this->device() ? *this : persistent(device); }

namespace {
// `t` copied into memory of its own on `device`.
Tensor persistent_copy(const Tensor& t, Device device) {
    Tensor own = Tensor::persistent(t.shape(), t.dtype(), device);
    if (!shape_tracing()) own.copy_from(t);  // a plan's hold no values (copying touches what is reserved)
    return own;
}
}  // namespace

Quantized4 Quantized4::persistent(Device device) const {
    Quantized4 q = *this;
    for (Tensor* t : {&q.codes, &q.absmax, &q.absmax_codes, &q.nested_absmax})
        if (t->defined()) *t = persistent_copy(*t, device);
    return q;
}

std::int64_t Quantized4::bytes() const {
    std::int64_t n = 0;
    for (const Tensor* t : {&codes, &absmax, &absmax_codes, &nested_absmax})
        if (t->defined()) n += static_cast<std::int64_t>(t->bytes());
    return n;
}

namespace {

// bitsandbytes' quantize_blockwise with the dynamic map: codes u8 [n] and absmax [ceil(n / 256)] of host
// values `in`.
void quantize_dynamic(const float* in, std::int64_t n, std::uint8_t* codes, float* absmax) {
    const auto s = kernels::sorted(kernels::kDynamicMap);
    const std::int64_t bs = kernels::kNestedBlock;
    for (std::int64_t b = 0; b * bs < n; ++b) {
        const std::int64_t i0 = b * bs, i1 = std::min(n, i0 + bs);
        absmax[b] = kernels::quantize_block(in, i0, i1, i1 - i0 < bs, s,
                                            [&](std::int64_t i, unsigned q) { codes[i] = static_cast<std::uint8_t>(q); });
    }
}

// The absmax quantized again (bitsandbytes' compress_statistics): less their mean, in blocks of 256.
void quantize_absmax(Quantized4& q) {
    const std::int64_t n = q.absmax.numel();
    const Device device = q.absmax.device();
    const std::int64_t nested_blocks = (n + kernels::kNestedBlock - 1) / kernels::kNestedBlock;
    if (shape_tracing()) {  // a plan: what it holds, nothing computed
        q.absmax = Tensor();
        q.absmax_codes = Tensor::persistent({n}, DType::u8, device);
        q.nested_absmax = Tensor::persistent({nested_blocks}, DType::f32, device);
        return;
    }
    const Tensor absmax = q.absmax.to(Device::cpu());
    const float* a = absmax.data<float>();
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += a[i];
    q.offset = static_cast<float>(sum / static_cast<double>(n));
    std::vector<float> centred(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) centred[i] = a[i] - q.offset;
    Tensor codes = Tensor::persistent({n}, DType::u8);
    Tensor nested = Tensor::persistent({nested_blocks}, DType::f32);
    quantize_dynamic(centred.data(), n, codes.data<std::uint8_t>(), nested.data<float>());
    q.absmax = Tensor();
    q.absmax_codes = device.is_cpu() ? codes : persistent_copy(codes, device);
    q.nested_absmax = device.is_cpu() ? nested : persistent_copy(nested, device);
}

}  // namespace

Quantized4 quantize_4bit(const Tensor& weight, const Quant4Spec& spec) {
    check_float("quantize_4bit", "weight", weight);
    LEVERS_CHECK(spec.blocksize >= 2 && spec.blocksize % 2 == 0, "quantize_4bit: blocks of {} values; give an even "
                 "size (bitsandbytes uses 64)", spec.blocksize);
    const Tensor in = weight.detach().to(weight.device(), DType::f32).contiguous();
    const std::int64_t n = in.numel();
    LEVERS_CHECK(n > 0, "quantize_4bit: the weight {} holds no values", describe(weight));
    Quantized4 q{.type = spec.type, .shape = weight.shape(), .blocksize = spec.blocksize};
    q.codes = Tensor::persistent({(n + 1) / 2}, DType::u8, in.device());
    q.absmax = Tensor::persistent({q.blocks()}, DType::f32, in.device());
    Quantize4Call call{.codes = arg(q.codes), .absmax = arg(q.absmax), .in = arg(in.view({n})), .type = spec.type,
                       .blocksize = spec.blocksize};
    run(in, call);
    if (spec.double_quant) quantize_absmax(q);
    return q;
}

Tensor dequantize_4bit(const Quantized4& q, DType dtype, std::int64_t row0, std::int64_t rows, std::int64_t col0,
                       std::int64_t cols) {
    LEVERS_CHECK(q.shape.ndim() == 2, "dequantize_4bit: a rectangle of a {} weight; rectangles are of 2-d weights",
                 q.shape.str());
    const std::int64_t height = q.shape[0], width = q.shape[1];
    LEVERS_CHECK(row0 >= 0 && rows >= 1 && row0 + rows <= height && col0 >= 0 && cols >= 1 && col0 + cols <= width,
                 "dequantize_4bit: rows {}..{} and columns {}..{} of a {} weight", row0, row0 + rows, col0,
                 col0 + cols, q.shape.str());
    Tensor out = Tensor::empty({rows, cols}, dtype, q.device());
    Dequantize4Call call{.out = arg(out), .codes = arg(q.codes), .absmax = arg(q.absmax),
                         .absmax_codes = arg(q.absmax_codes), .nested_absmax = arg(q.nested_absmax),
                         .offset = q.offset, .type = q.type, .blocksize = q.blocksize, .row_len = width,
                         .row0 = row0, .col0 = col0};
    run(out, call);
    return out;
}

Tensor dequantize_4bit(const Quantized4& q, DType dtype) {
    const std::int64_t n = q.shape.numel();
    const std::int64_t width = q.shape.ndim() >= 1 ? q.shape.last() : 1;
    Quantized4 flat = q;
    flat.shape = Shape{n / width, width};
    return dequantize_4bit(flat, dtype, 0, n / width, 0, width).view(q.shape);
}

namespace {

// out (accumulate: +=) = a · b, through the matrix product's kernel (operands as BLAS reads them).
void product_into(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate) {
    MatmulCall call{.out = arg(out), .a = strided(a), .b = strided(b), .accumulate = accumulate};
    run(out, call);
}

// How many rows (forward) or columns (backward) of the weight one tile holds, `across` values each: all
// `span` where they fit in `tile` values, else as many as do (at least one).
std::int64_t tile_of(std::int64_t span, std::int64_t across, std::int64_t tile) {
    return span * across <= tile ? span : std::max<std::int64_t>(1, tile / across);
}

struct Linear4Saved {
    std::shared_ptr<const Quantized4> weight;
    std::int64_t tile = 0;
    autograd::SavedTensor in, u, a, b;  // the adapter's, where there is one
    double scale = 0;
};

// in · Wᵀ (+ bias) into out, W dequantized a tile of its rows at a time: each tile's columns of out computed
// whole (the product's full depth), then put in place.
void product_4bit(const Tensor& out, const Tensor& in, const Quantized4& w, const Tensor& bias, std::int64_t tile) {
    const std::int64_t out_dim = w.shape[0], in_dim = w.shape[1], rows = in.numel() / in_dim;
    const DType dtype = in.dtype();
    const std::int64_t step = tile_of(out_dim, in_dim, tile);
    if (step == out_dim) {  // one tile: the dense layer's own kernel, on the dequantized weight
        linear_into(out, in, dequantize_4bit(w, dtype, 0, out_dim, 0, in_dim), bias);
        return;
    }
    const Tensor x = in.detach().view({rows, in_dim}), y = out.detach().view({rows, out_dim});
    Tensor part = Tensor::empty({rows, step}, dtype, in.device());
    for (std::int64_t r0 = 0; r0 < out_dim; r0 += step) {
        const std::int64_t n = std::min(step, out_dim - r0);
        const Tensor cols = n == step ? part : Tensor::empty({rows, n}, dtype, in.device());
        linear_into(cols, x, dequantize_4bit(w, dtype, r0, n, 0, in_dim),
                    bias.defined() ? bias.detach().narrow(0, r0, n).contiguous() : Tensor());
        y.narrow(1, r0, n).copy_from(cols);
    }
}

// d_in = d_out · W, W dequantized a tile of its columns at a time (each tile's columns of d_in whole).
void input_grad_4bit(const Tensor& d_in, const Tensor& d_out, const Quantized4& w, std::int64_t tile) {
    const std::int64_t out_dim = w.shape[0], in_dim = w.shape[1], rows = d_out.dim(0);
    const Tensor dx = d_in.view({rows, in_dim});
    const std::int64_t step = tile_of(in_dim, out_dim, tile);
    if (step == in_dim) {
        product_into(dx, d_out, dequantize_4bit(w, d_out.dtype(), 0, out_dim, 0, in_dim), false);
        return;
    }
    for (std::int64_t c0 = 0; c0 < in_dim; c0 += step) {
        const std::int64_t n = std::min(step, in_dim - c0);
        const Tensor cols = Tensor::empty({rows, n}, d_out.dtype(), d_out.device());
        product_into(cols, d_out, dequantize_4bit(w, d_out.dtype(), 0, out_dim, c0, n), false);
        dx.narrow(1, c0, n).copy_from(cols);
    }
}

}  // namespace

Tensor lora_linear_4bit(const Tensor& input, std::shared_ptr<const Quantized4> weight, const Tensor& bias_in,
                        const Tensor& a_in, const Tensor& b_in, double scale, std::int64_t tile_elements) {
    LEVERS_CHECK(weight != nullptr, "linear_4bit: no weight");
    const Quantized4& w = *weight;
    const Tensor in = dense(input), bias = dense(bias_in), a = dense(a_in), b = dense(b_in);
    check_float("linear_4bit", "input", in);
    check_ndim_at_least("linear_4bit", "input", in, 1);
    LEVERS_CHECK(w.shape.ndim() == 2 && in.shape().last() == w.shape[1] && in.device() == w.device(),
                 "linear_4bit: 'input' {} against a 4-bit weight {} on {}; the input needs [*, {}] there",
                 describe(in), w.shape.str(), w.device().str(), w.shape.ndim() == 2 ? w.shape[1] : 0);
    const std::int64_t out_dim = w.shape[0], in_dim = w.shape[1], rows = in.numel() / in_dim;
    if (bias.defined()) {
        check_like("linear_4bit", "bias", bias, "input", in);
        check_shape("linear_4bit", "bias", bias, {out_dim}, [&] { return fmt::format("the weight needs [{}]", out_dim); });
    }
    const bool adapter = a.defined();
    if (adapter) {
        check_like("linear_4bit", "lora_a", a, "input", in);
        check_like("linear_4bit", "lora_b", b, "input", in);
        LEVERS_CHECK(a.shape().ndim() == 2 && a.dim(1) == in_dim && b.shape() == Shape({out_dim, a.dim(0)}),
                     "linear_4bit: adapters {} and {} for a {} weight; they need [rank, {}] and [{}, rank]",
                     a.shape().str(), b.shape().str(), w.shape.str(), in_dim, out_dim);
    }
    Tensor out = Tensor::empty(in.shape().with_dim(in.shape().ndim() - 1, out_dim), in.dtype(), in.device());
    product_4bit(out, in, w, bias, tile_elements);
    Tensor u;
    if (adapter) {  // out += scale · (in · Aᵀ) · Bᵀ, u kept for backward
        u = Tensor::empty({rows, a.dim(0)}, in.dtype(), in.device());
        LoraCall call{.out = arg(out), .u = arg(u), .in = arg(in), .a = arg(a), .b = arg(b), .scale = scale};
        run(in, call);
    }
    if (auto* s = autograd::record<Linear4Saved>(
            "linear_4bit",
            [](autograd::Backward& g, const Linear4Saved& s) {
                const std::int64_t out_dim = s.weight->shape[0];
                const Tensor dy = g.grad_out().contiguous().view({g.grad_out().numel() / out_dim, out_dim});
                const Tensor d_in = g.needs_grad(0) ? g.write_grad(0) : Tensor();
                if (d_in.defined()) input_grad_4bit(d_in, dy, *s.weight, s.tile);
                if (g.needs_grad(1))  // d_bias += column sums of d_out
                    product_into(g.add_grad(1).view({1, out_dim}),
                                 Tensor::full({1, dy.dim(0)}, 1, dy.dtype(), dy.device()), dy, true);
                const Tensor& u = s.u;
                if (!u.defined()) return;
                const Tensor d_a = g.add_grad_or_scratch(2), d_b = g.add_grad_or_scratch(3);
                const Tensor du = Tensor::empty(u.shape(), u.dtype(), u.device());
                LoraBackwardCall call{.d_in = arg(d_in), .d_a = arg(d_a), .d_b = arg(d_b), .du = arg(du),
                                      .d_out = arg(dy), .in = arg(s.in), .u = arg(u), .a = arg(s.a), .b = arg(s.b),
                                      .scale = s.scale};
                run(dy, call);
            },
            {&in, &bias, &a, &b}, {&out})) {
        s->weight = std::move(weight);
        s->tile = tile_elements;
        if (adapter) {
            s->in = in;
            s->u = u;
            s->a = a;
            s->b = b;
            s->scale = scale;
        }
    }
    return out;
}

Tensor linear_4bit(const Tensor& in, std::shared_ptr<const Quantized4> weight, const Tensor& bias,
                   std::int64_t tile_elements) {
    return lora_linear_4bit(in, std::move(weight), bias, Tensor(), Tensor(), 0, tile_elements);
}

}  // namespace levers::ops

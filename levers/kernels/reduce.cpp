#include "levers/kernels/reduce.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"

#include <cmath>
#include <limits>

namespace levers::ops {

namespace {

using Mode = ReduceCall::Mode;

// Which dimensions `dims` names (every one when empty), each once, as a bit set.
using DimSet = std::uint32_t;
bool has(DimSet set, int d) { return (set >> d) & 1u; }
DimSet reduced_set(const char* op, const Tensor& x, const Dims& dims) {
    if (dims.empty()) return (DimSet{1} << x.ndim()) - 1;
    DimSet set = 0;
    for (const int d : dims) {
        const int w = wrap_dim(op, d, x.ndim());
        if (x.ndim() == 0) continue;
        LEVERS_CHECK(!has(set, w), "{}: dimension {} is named twice", op, d);
        set |= DimSet{1} << w;
    }
    return set;
}

// x's shape with reduced dimensions of size 1 (keepdim), and without them.
Shape kept_shape(const Tensor& x, DimSet reduced) {
    Shape s;
    for (int d = 0; d < x.ndim(); ++d) s = s.appended(has(reduced, d) ? 1 : x.dim(d));
    return s;
}
Shape dropped_shape(const Tensor& x, DimSet reduced) {
    Shape s;
    for (int d = 0; d < x.ndim(); ++d)
        if (!has(reduced, d)) s = s.appended(x.dim(d));
    return s;
}
std::int64_t reduced_count(const Tensor& x, DimSet reduced) {
    std::int64_t n = 1;
    for (int d = 0; d < x.ndim(); ++d)
        if (has(reduced, d)) n *= x.dim(d);
    return n;
}

// The kernel: the keepdim result (and the indices, where asked).
Tensor run_reduce(const Tensor& x, const Shape& keep, Mode mode, double scale, Tensor* indices) {
    Tensor out = Tensor::empty(keep, x.dtype(), x.device());
    ReduceCall call{.out = strided(out), .in = strided(x), .mode = mode, .scale = scale};
    if (indices) {
        *indices = Tensor::empty(keep, DType::i32, x.device());
        call.index = strided(*indices);
    }
    run(x, call);
    return out;
}

struct SumSaved {
    Shape keep;
};
// sum or mean: `scale` 1 or 1/n. The gradient is the upstream one spread over what was summed.
Tensor sum_scaled(const char* op, const Tensor& x, const Dims& dims, bool keepdim, bool average) {
    check_defined(op, "x", x);
    LEVERS_CHECK(is_float(x.dtype()) || (!average && x.dtype() == DType::i32),
                 "{}: 'x' is {}, expected a float dtype{}", op, describe(x), average ? "" : " or i32");
    const DimSet reduced = reduced_set(op, x, dims);
    const Shape keep = kept_shape(x, reduced);
    const std::int64_t n = reduced_count(x, reduced);
    const double scale = average ? (n == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(n)) : 1;
    Tensor out = run_reduce(x, keep, Mode::sum, scale, nullptr);
    if (!keepdim) out = out.view(dropped_shape(x, reduced));
    struct Saved {
        Shape keep;
        double scale;
    };
    if (auto* s = autograd::record<Saved>(
            op,
            [](autograd::Backward& g, const Saved& s) {
                Tensor up = g.grad_out().view(s.keep);
                if (s.scale != 1) up = mul(up, s.scale);
                g.pass_grad(0, up.expand(g.input_shape(0)));
            },
            {&x}, {&out}))
        *s = {keep, scale};
    return out;
}

// amax / amin: ties share the gradient evenly.
Tensor extreme(const char* op, const Tensor& x, const Dims& dims, bool keepdim, Mode mode) {
    check_float(op, "x", x);
    const DimSet reduced = reduced_set(op, x, dims);
    LEVERS_CHECK(reduced_count(x, reduced) > 0, "{}: the {} of no elements (shape {})", op,
                 mode == Mode::max ? "maximum" : "minimum", x.shape().str());
    const Shape keep = kept_shape(x, reduced);
    Tensor kept = run_reduce(x, keep, mode, 1, nullptr);
    Tensor out = keepdim ? kept : kept.view(dropped_shape(x, reduced));
    struct Saved {
        autograd::SavedTensor x, kept;
        DimSet reduced;
    };
    if (auto* s = autograd::record<Saved>(
            op,
            [](autograd::Backward& g, const Saved& s) {
                const Tensor& kept = s.kept;
                const Tensor hit = eq(s.x, kept);
                Dims dims;
                for (int d = 0; d < kept.ndim(); ++d)
                    if (has(s.reduced, d)) dims.push_back(d);
                const Tensor count = sum(hit.to(kept.dtype()), dims, true);
                const Tensor share = div(g.grad_out().view(kept.shape()), count);
                g.set_grad(0, where(hit, share, 0.0));
            },
            {&x}, {&out}))
        *s = {.x = x, .kept = kept, .reduced = reduced};
    return out;
}

ValuesIndices extreme_along(const char* op, const Tensor& x, int dim, bool keepdim, Mode mode) {
    check_defined(op, "x", x);
    LEVERS_CHECK(is_float(x.dtype()) || x.dtype() == DType::i32, "{}: 'x' is {}, expected a float dtype or i32", op,
                 describe(x));
    const DimSet reduced = reduced_set(op, x, {dim});
    LEVERS_CHECK(reduced_count(x, reduced) > 0, "{}: dimension {} of {} is empty", op, dim, x.shape().str());
    const Shape keep = kept_shape(x, reduced);
    Tensor indices;
    Tensor values = run_reduce(x, keep, mode, 1, &indices);
    const int d = x.ndim() == 0 ? 0 : wrap_dim(op, dim, x.ndim());
    struct Saved {
        autograd::SavedTensor indices;
        int dim;
        Shape keep;
    };
    Tensor kept_indices = indices;
    if (!keepdim) {
        const Shape dropped = dropped_shape(x, reduced);
        values = values.view(dropped);
        indices = indices.view(dropped);
    }
    if (auto* s = autograd::record<Saved>(
            op,
            [](autograd::Backward& g, const Saved& s) {
                Tensor d = g.add_grad(0);
                if (d.ndim() == 0) {
                    autograd::add_into(d, d, g.grad_out().view(d.shape()));
                    return;
                }
                scatter_add_(d, s.dim, s.indices, g.grad_out().view(s.keep));
            },
            {&x}, {&values}))
        *s = {.indices = kept_indices, .dim = d, .keep = keep};
    return {values, indices};
}

Tensor arg_extreme(const char* op, const Tensor& x, int dim, bool keepdim, Mode mode) {
    autograd::InferenceMode no_graph;
    return extreme_along(op, x, dim, keepdim, mode).indices;
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) { return sum_scaled("sum", x, dims, keepdim, false); }
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) { return sum_scaled("mean", x, dims, keepdim, true); }
Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) { return extreme("amax", x, dims, keepdim, Mode::max); }
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) { return extreme("amin", x, dims, keepdim, Mode::min); }
ValuesIndices max(const Tensor& x, int dim, bool keepdim) { return extreme_along("max", x, dim, keepdim, Mode::max); }
ValuesIndices min(const Tensor& x, int dim, bool keepdim) { return extreme_along("min", x, dim, keepdim, Mode::min); }
Tensor argmax(const Tensor& x, int dim, bool keepdim) { return arg_extreme("argmax", x, dim, keepdim, Mode::max); }
Tensor argmin(const Tensor& x, int dim, bool keepdim) { return arg_extreme("argmin", x, dim, keepdim, Mode::min); }
Tensor argmax(const Tensor& x) { return arg_extreme("argmax", x.reshape({-1}), 0, false, Mode::max); }
Tensor argmin(const Tensor& x) { return arg_extreme("argmin", x.reshape({-1}), 0, false, Mode::min); }

Tensor var(const Tensor& x, const Dims& dims, int correction, bool keepdim) {
    check_float("var", "x", x);
    LEVERS_CHECK(correction >= 0, "var: correction must be >= 0, got {}", correction);
    const std::int64_t n = reduced_count(x, reduced_set("var", x, dims));
    const Tensor centred = sub(x, mean(x, dims, true));
    const double denominator = static_cast<double>(n - correction);
    return mul(sum(square(centred), dims, keepdim),
               denominator > 0 ? 1.0 / denominator : std::numeric_limits<double>::quiet_NaN());
}

Tensor std_dev(const Tensor& x, const Dims& dims, int correction, bool keepdim) {
    return sqrt(var(x, dims, correction, keepdim));
}

Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) {
    check_float("norm", "x", x);
    LEVERS_CHECK(p > 0, "norm: p must be positive (1, 2, infinity or any p > 0), got {}", p);
    if (std::isinf(p)) return amax(abs(x), dims, keepdim);
    if (p == 1) return sum(abs(x), dims, keepdim);
    if (p == 2) return sqrt(sum(square(x), dims, keepdim));
    return pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
    check_float("logsumexp", "x", x);
    // Shifted by the maximum, a constant for the gradient (which is softmax(x) either way).
    Tensor shift;
    {
        autograd::InferenceMode constant;
        shift = amax(x, dims, true);
        // An all -inf (or +inf) slice would shift to NaN: those shift by nothing.
        masked_fill_(shift, eq(abs(shift), std::numeric_limits<double>::infinity()), 0.0);
    }
    Tensor out = add(log(sum(exp(sub(x, shift)), dims, true)), shift);
    if (keepdim) return out;
    return out.view(dropped_shape(x, reduced_set("logsumexp", x, dims)));
}

}  // namespace levers::ops

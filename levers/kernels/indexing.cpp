#include "levers/kernels/indexing.hpp"

#include "levers/core/shape_trace.hpp"
#include "levers/kernels/elementwise.hpp"

#include <algorithm>
#include <cmath>

namespace levers::ops {

Tensor checked_indices(const char* op, const Tensor& index, std::int64_t size, const Tensor& like) {
    check_dtype(op, "index", index, DType::i32);
    if (shape_tracing()) return index.to(like.device());  // an op's output holds no values in a trace
    // Checked on the host: a GPU's kernel cannot stop on a bad index.
    Tensor host = index.to(Device::cpu()).contiguous();
    bool negative = false;
    const std::int32_t* v = host.data<std::int32_t>();
    for (std::int64_t i = 0; i < host.numel(); ++i) {
        LEVERS_CHECK(-size <= v[i] && v[i] < size,
                     "{}: index {} (at element {} of 'index') is out of range for a dimension of size {} (valid: {} "
                     "to {})",
                     op, v[i], i, size, -size, size - 1);
        negative |= v[i] < 0;
    }
    if (negative) {
        host = host.clone();
        std::int32_t* w = host.data<std::int32_t>();
        for (std::int64_t i = 0; i < host.numel(); ++i)
            if (w[i] < 0) w[i] += static_cast<std::int32_t>(size);
    }
    if (!negative && index.device() == like.device() && index.is_contiguous()) return index;
    return host.to(like.device());
}

namespace {

struct IndexSaved {
    autograd::SavedTensor index;
    int dim;
};

// Checks index against x for gather (index's other dimensions no larger than x's).
void check_gather_shapes(const char* op, const Tensor& x, int dim, const Tensor& index) {
    LEVERS_CHECK(index.ndim() == x.ndim(), "{}: 'index' {} needs as many dimensions as 'x' {}", op, index.shape().str(),
                 x.shape().str());
    for (int d = 0; d < x.ndim(); ++d)
        LEVERS_CHECK(d == dim || index.dim(d) <= x.dim(d),
                     "{}: 'index' {} is larger than 'x' {} in dimension {} (only dimension {} may differ)", op,
                     index.shape().str(), x.shape().str(), d, dim);
}

void run_scatter_add(const Tensor& out, int dim, const Tensor& index, const Tensor& src) {
    ScatterAddCall call{.out = arg(out), .src = strided(src), .index = strided(index), .dim = dim};
    run(out, call);
}

}  // namespace

Tensor gather(const Tensor& x, int dim, const Tensor& index_in) {
    check_defined("gather", "x", x);
    const int d = wrap_dim("gather", dim, std::max(x.ndim(), 1));
    LEVERS_CHECK(x.ndim() >= 1, "gather: 'x' needs at least one dimension");
    check_gather_shapes("gather", x, d, index_in);
    const Tensor index = checked_indices("gather", index_in, x.dim(d), x);
    Tensor out = Tensor::empty(index.shape(), x.dtype(), x.device());
    GatherCall call{.out = arg(out), .in = strided(x), .index = strided(index), .dim = d};
    run(x, call);
    if (auto* s = autograd::record<IndexSaved>(
            "gather",
            [](autograd::Backward& g, const IndexSaved& s) {
                const Tensor dx = g.add_grad(0);
                run_scatter_add(dx, s.dim, s.index, g.grad_out());
            },
            {&x}, {&out}))
        *s = {index, d};
    return out;
}

void scatter_add_(const Tensor& x, int dim, const Tensor& index_in, const Tensor& src) {
    check_defined("scatter_add", "x", x);
    check_like("scatter_add", "src", src, "x", x);
    LEVERS_CHECK(x.ndim() >= 1, "scatter_add: 'x' needs at least one dimension");
    const int d = wrap_dim("scatter_add", dim, x.ndim());
    LEVERS_CHECK(index_in.shape() == src.shape(), "scatter_add: 'index' {} must have the shape of 'src' {}",
                 index_in.shape().str(), src.shape().str());
    check_gather_shapes("scatter_add", x, d, src);
    LEVERS_CHECK(x.is_contiguous(), "scatter_add_: 'x' {} must be contiguous (it is written in place)", x.shape().str());
    const Tensor index = checked_indices("scatter_add", index_in, x.dim(d), x);
    run_scatter_add(x, d, index, src);
}

Tensor scatter_add(const Tensor& x, int dim, const Tensor& index_in, const Tensor& src) {
    Tensor out = x.clone();
    {
        autograd::InferenceMode into_the_copy;
        scatter_add_(out, dim, index_in, src);
    }
    const int d = wrap_dim("scatter_add", dim, x.ndim());
    const Tensor index = checked_indices("scatter_add", index_in, x.dim(d), x);
    if (auto* s = autograd::record<IndexSaved>(
            "scatter_add",
            [](autograd::Backward& g, const IndexSaved& s) {
                g.pass_grad(0, g.grad_out());
                if (g.needs_grad(2)) {
                    GatherCall call{.out = {}, .in = strided(g.grad_out()), .index = strided(s.index), .dim = s.dim};
                    const Tensor d_src = g.write_grad(2);
                    call.out = arg(d_src);
                    run(d_src, call);
                }
            },
            {&x, &index, &src}, {&out}))
        *s = {index, d};
    return out;
}

Tensor index_select(const Tensor& x, int dim, const Tensor& index) {
    check_defined("index_select", "x", x);
    LEVERS_CHECK(x.ndim() >= 1, "index_select: 'x' needs at least one dimension");
    const int d = wrap_dim("index_select", dim, x.ndim());
    check_dtype("index_select", "index", index, DType::i32);
    LEVERS_CHECK(index.ndim() <= 1, "index_select: 'index' is {}, expected one dimension", describe(index));
    // gather with the index repeated over every other dimension (stride 0).
    Shape shape;
    for (int i = 0; i < x.ndim(); ++i) shape = shape.appended(i == d ? index.numel() : 1);
    const Tensor along = checked_indices("index_select", index, x.dim(d), x).reshape(shape);
    return gather(x, d, along.expand(x.shape().with_dim(d, index.numel())));
}

// --- joining and splitting -----------------------------------------------------------

namespace {
Tensor cat_of(const Tensor* tensors, std::size_t count, int dim) {
    LEVERS_CHECK(count > 0, "cat: no tensors to join");
    const Tensor& first = tensors[0];
    check_defined("cat", "tensors[0]", first);
    LEVERS_CHECK(first.ndim() >= 1, "cat: tensors need at least one dimension");
    const int d = wrap_dim("cat", dim, first.ndim());
    // A node holds at most Node::kInputs inputs: longer lists join in groups first.
    constexpr std::size_t kGroup = autograd::Node::kInputs;
    if (count > kGroup) {
        std::vector<Tensor> groups;
        for (std::size_t i = 0; i < count; i += kGroup) groups.push_back(cat_of(tensors + i, std::min(count - i, kGroup), d));
        return cat_of(groups.data(), groups.size(), d);
    }
    std::int64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const Tensor& t = tensors[i];
        check_like("cat", "tensors[i]", t, "tensors[0]", first);
        LEVERS_CHECK(t.ndim() == first.ndim() && t.shape().with_dim(d, 0) == first.shape().with_dim(d, 0),
                     "cat: tensors[{}] is {}, but tensors[0] is {}: only dimension {} may differ", i, t.shape().str(),
                     first.shape().str(), dim);
        total += t.dim(d);
    }
    Tensor out = Tensor::empty(first.shape().with_dim(d, total), first.dtype(), first.device());
    std::int64_t at = 0;
    for (std::size_t i = 0; i < count; ++i) {
        out.narrow(d, at, tensors[i].dim(d)).copy_(tensors[i]);
        at += tensors[i].dim(d);
    }
    struct Saved {
        int dim;
    };
    std::array<const Tensor*, kGroup> inputs{};
    const Tensor none;
    for (std::size_t i = 0; i < kGroup; ++i) inputs[i] = i < count ? &tensors[i] : &none;
    if (auto* s = autograd::record<Saved>(
            "cat",
            [](autograd::Backward& g, const Saved& s) {
                std::int64_t at = 0;
                for (int k = 0; k < g.node().n_in; ++k) {
                    if (!g.node().in[static_cast<std::size_t>(k)].present) break;
                    const std::int64_t n = g.input_shape(k)[s.dim];
                    if (g.needs_grad(k)) g.pass_grad(k, g.grad_out().narrow(s.dim, at, n));
                    at += n;
                }
            },
            {inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[5]}, {&out}))
        s->dim = d;
    return out;
}
}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
    check_defined("cast", "x", x);
    if (x.dtype() == dtype) return x;
    Tensor out = x.to(dtype);
    struct Saved {};
    autograd::record<Saved>(
        "cast", [](autograd::Backward& g, const Saved&) { g.write_grad(0).copy_(g.grad_out()); }, {&x}, {&out});
    return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int dim) { return cat_of(tensors.data(), tensors.size(), dim); }
Tensor cat(std::initializer_list<Tensor> tensors, int dim) { return cat_of(tensors.begin(), tensors.size(), dim); }

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
    LEVERS_CHECK(!tensors.empty(), "stack: no tensors to join");
    const int d = wrap_dim("stack", dim, tensors.front().ndim() + 1);
    std::vector<Tensor> parts;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        LEVERS_CHECK(tensors[i].shape() == tensors.front().shape(), "stack: tensors[{}] is {}, but tensors[0] is {}",
                     i, tensors[i].shape().str(), tensors.front().shape().str());
        parts.push_back(tensors[i].unsqueeze(d));
    }
    return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, std::int64_t size, int dim) {
    LEVERS_CHECK(size >= 1, "split: pieces of {} elements; the size must be at least 1", size);
    const int d = wrap_dim("split", dim, x.ndim());
    std::vector<Tensor> out;
    for (std::int64_t at = 0; at < x.dim(d); at += size) out.push_back(x.narrow(d, at, std::min(size, x.dim(d) - at)));
    return out;
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim) {
    LEVERS_CHECK(chunks >= 1, "chunk: {} chunks; at least 1 is needed", chunks);
    const int d = wrap_dim("chunk", dim, x.ndim());
    return split(x, std::max<std::int64_t>(1, (x.dim(d) + chunks - 1) / chunks), d);
}

// --- making tensors ------------------------------------------------------------------

Tensor arange(double start, double end, double step, DType dtype, Device device) {
    LEVERS_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                 "arange: start {}, end {} and step {} must be finite, the step not zero", start, end, step);
    LEVERS_CHECK(dtype != DType::boolean, "arange: a range of bools makes no sense; ask for i32 or a float dtype");
    const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((end - start) / step)));
    // Written on the host in f64 or i32 (pool memory, nothing on the heap), then converted and moved.
    const DType host_type = dtype == DType::i32 ? DType::i32 : DType::f64;
    const Tensor host = Tensor::empty({n}, host_type);
    for (std::int64_t i = 0; i < n; ++i) {
        const double v = start + static_cast<double>(i) * step;
        if (host_type == DType::i32)
            host.data<std::int32_t>()[i] = static_cast<std::int32_t>(v);
        else
            host.data<double>()[i] = v;
    }
    return host.to(device, dtype);
}

Tensor arange(std::int64_t n, DType dtype, Device device) { return arange(0, static_cast<double>(n), 1, dtype, device); }

Tensor full_like(const Tensor& x, double value) { return Tensor::full(x.shape(), value, x.dtype(), x.device()); }
Tensor zeros_like(const Tensor& x) { return full_like(x, 0); }
Tensor ones_like(const Tensor& x) { return full_like(x, 1); }

Tensor one_hot(const Tensor& ids, std::int64_t classes, DType dtype) {
    LEVERS_CHECK(classes >= 1, "one_hot: {} classes; at least 1 is needed", classes);
    const Tensor checked = checked_indices("one_hot", ids, classes, ids);
    return eq(checked.unsqueeze(-1), arange(classes, DType::i32, ids.device())).to(dtype);
}

namespace {
// The mask of the last two dimensions' triangle: col - row >= k (upper) or <= k (lower).
Tensor triangle(const char* op, const Tensor& x, std::int64_t k, bool upper) {
    check_defined(op, "x", x);
    LEVERS_CHECK(x.ndim() >= 2, "{}: 'x' is {}, expected at least two dimensions", op, describe(x));
    const std::int64_t rows = x.dim(-2), cols = x.dim(-1);
    const Tensor diff =
        sub(arange(cols, DType::i32, x.device()).unsqueeze(0), arange(rows, DType::i32, x.device()).unsqueeze(1));
    const Tensor keep = upper ? ge(diff, static_cast<double>(k)) : le(diff, static_cast<double>(k));
    return where(keep, x, 0.0);
}
}  // namespace

Tensor triu(const Tensor& x, std::int64_t k) { return triangle("triu", x, k, true); }
Tensor tril(const Tensor& x, std::int64_t k) { return triangle("tril", x, k, false); }

Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats) {
    const int n = static_cast<int>(repeats.size());
    LEVERS_CHECK(n >= x.ndim(), "repeat: {} repeats for a tensor of {} dimensions (at least one per dimension)", n,
                 x.ndim());
    LEVERS_CHECK(2 * n <= Shape::kMaxDims, "repeat: {} repeats need {} dimensions on the way, more than {}", n, 2 * n,
                 Shape::kMaxDims);
    // [1, s0, 1, s1, ...] expanded to [r0, s0, r1, s1, ...], then merged pairwise.
    std::vector<std::int64_t> interleaved, expanded, out;
    for (int i = 0; i < n; ++i) {
        const int src = i - (n - x.ndim());
        const std::int64_t size = src < 0 ? 1 : x.dim(src);
        LEVERS_CHECK(repeats[static_cast<std::size_t>(i)] >= 0, "repeat: repeat counts must be >= 0");
        interleaved.insert(interleaved.end(), {1, size});
        expanded.insert(expanded.end(), {repeats[static_cast<std::size_t>(i)], size});
        out.push_back(repeats[static_cast<std::size_t>(i)] * size);
    }
    return x.reshape(Shape(interleaved)).expand(Shape(expanded)).reshape(Shape(out));
}

Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, int dim) {
    LEVERS_CHECK(repeats >= 1, "repeat_interleave: repeats must be >= 1, got {}", repeats);
    const int d = wrap_dim("repeat_interleave", dim, x.ndim());
    Shape expanded = x.unsqueeze(d + 1).shape().with_dim(d + 1, repeats);
    return x.unsqueeze(d + 1).expand(expanded).flatten(d, d + 1);
}

}  // namespace levers::ops

// Views: new shapes and strides over the same memory, each recorded so that
// gradients flow back through it. Four kinds of backward cover them all: a
// reshape (the gradient reshaped back), a permutation (permuted back), a
// slice (added into the slice of the input's gradient) and an expansion
// (summed over the repeated dimensions).
#include "levers/core/autograd.hpp"
#include "levers/core/tensor.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

namespace levers {

Dims::Dims(std::initializer_list<int> dims) {
    for (const int d : dims) push_back(d);
}
Dims::Dims(const std::vector<int>& dims) {
    for (const int d : dims) push_back(d);
}
void Dims::push_back(int d) {
    LEVERS_CHECK(n_ < Shape::kMaxDims, "a list of dimensions holds at most {}", Shape::kMaxDims);
    v_[static_cast<std::size_t>(n_++)] = d;
}

int wrap_dim(const char* op, int dim, int ndim) {
    const int lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
    LEVERS_CHECK(lo <= dim && dim <= hi, "{}: dimension {} does not exist in a tensor of {} dimension{} (valid: {} to {})",
                 op, dim, ndim, ndim == 1 ? "" : "s", lo, hi);
    return dim < 0 ? dim + std::max(ndim, 1) : dim;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
    const int n = std::max(a.ndim(), b.ndim());
    Shape out;
    for (int i = 0; i < n; ++i) {
        const int da = a.ndim() - n + i, db = b.ndim() - n + i;
        const std::int64_t sa = da < 0 ? 1 : a[da], sb = db < 0 ? 1 : b[db];
        LEVERS_CHECK(sa == sb || sa == 1 || sb == 1,
                     "{}: shapes {} and {} do not broadcast (dimension {} from the end: {} against {}; each pair must "
                     "be equal or one of them 1)",
                     op, a.str(), b.str(), n - i, sa, sb);
        out = out.appended(sa == 1 ? sb : sa);
    }
    return out;
}

bool broadcastable(const Shape& a, const Shape& b) {
    for (int i = 1; i <= std::min(a.ndim(), b.ndim()); ++i) {
        const std::int64_t sa = a[a.ndim() - i], sb = b[b.ndim() - i];
        if (sa != sb && sa != 1 && sb != 1) return false;
    }
    return true;
}

namespace {

// `sizes` with one -1 inferred from `numel`.
Shape infer_shape(const char* op, std::initializer_list<std::int64_t> sizes, std::int64_t numel, const Shape& from) {
    LEVERS_CHECK(static_cast<int>(sizes.size()) <= Shape::kMaxDims, "{}: a shape has at most {} dimensions", op,
                 Shape::kMaxDims);
    std::int64_t known = 1;
    int infer = -1, i = 0;
    for (const std::int64_t size : sizes) {
        if (size == -1) {
            LEVERS_CHECK(infer < 0, "{}: only one size may be -1", op);
            infer = i;
        } else {
            LEVERS_CHECK(size >= 0, "{}: size {} is negative", op, size);
            known *= size;
        }
        ++i;
    }
    if (infer >= 0)
        LEVERS_CHECK(known != 0 && numel % known == 0, "{}: a tensor of shape {} cannot be seen with sizes of product {}", op,
                     from.str(), known);
    Shape out;
    i = 0;
    for (const std::int64_t size : sizes) out = out.appended(i++ == infer ? numel / known : size);
    return out;
}

// Strides that show memory laid out as (shape, strides) in `to`'s shape, or
// false where no strides can (PyTorch's rule: each group of new dimensions
// must fall within a run of old ones that memory keeps contiguous).
bool view_strides(const Shape& shape, const Strides& strides, const Shape& to, Strides& out) {
    if (strides.contiguous_for(shape) || shape.numel() == 0) {
        out = Strides::contiguous(to);
        return true;
    }
    int view_d = to.ndim() - 1;
    std::int64_t chunk_base = strides[shape.ndim() - 1], tensor_numel = 1, view_numel = 1;
    for (int d = shape.ndim() - 1; d >= 0; --d) {
        tensor_numel *= shape[d];
        if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
                out[view_d] = view_numel * chunk_base;
                view_numel *= to[view_d];
                --view_d;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

// `shape` and `strides` without dimension d.
void drop_dim(const Shape& shape, const Strides& strides, int d, Shape& out_shape, Strides& out_strides) {
    for (int i = 0; i < shape.ndim(); ++i)
        if (i != d) {
            out_strides[out_shape.ndim()] = strides[i];
            out_shape = out_shape.appended(shape[i]);
        }
}

bool recorded(const Tensor& t) { return t.value_ref().tape != nullptr || t.leaf() != nullptr; }

// The four backward kinds.
void record_reshape(const char* op, const Tensor& in, Tensor& out) {
    if (!recorded(in)) return;
    autograd::record(op, [](autograd::Backward& g) { g.pass_grad(0, g.grad_out().reshape(g.input_shape(0))); }, {&in},
                     {&out});
}

struct PermuteState {
    std::array<int, Shape::kMaxDims> inverse{};
};
void record_permute(const Tensor& in, Tensor& out, const std::array<int, Shape::kMaxDims>& perm) {
    if (!recorded(in)) return;
    auto* s = autograd::record<PermuteState>(
        "permute",
        [](autograd::Backward& g, const PermuteState& s) {
            Dims inverse;
            for (int i = 0; i < g.grad_out().ndim(); ++i) inverse.push_back(s.inverse[static_cast<std::size_t>(i)]);
            g.pass_grad(0, g.grad_out().permute(inverse));
        },
        {&in}, {&out});
    if (s)
        for (int i = 0; i < in.ndim(); ++i) s->inverse[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] = i;
}

struct SliceState {
    int dim = 0;
    std::int64_t begin = 0, step = 1;
    bool select = false;
};
void record_slice(const Tensor& in, Tensor& out, int dim, std::int64_t begin, std::int64_t step, bool select) {
    if (!recorded(in)) return;
    auto* s = autograd::record<SliceState>(
        select ? "select" : "slice",
        [](autograd::Backward& g, const SliceState& s) {
            // The elements go back where they came from, adding to what else reached the input.
            const Tensor d = g.add_grad(0);
            const Tensor& up = g.grad_out();
            const Tensor region = s.select ? d.select(s.dim, s.begin)
                                           : d.slice(s.dim, s.begin, s.begin + up.dim(s.dim) * s.step, s.step);
            autograd::add_into(region, region, up);
        },
        {&in}, {&out});
    if (s) *s = {dim, begin, step, select};
}

void record_expand(const Tensor& in, Tensor& out) {
    if (!recorded(in)) return;
    autograd::record(
        "expand", [](autograd::Backward& g) { g.set_grad(0, autograd::sum_to(g.grad_out(), g.input_shape(0)).contiguous()); },
        {&in}, {&out});
}

}  // namespace

// --- reshapes ------------------------------------------------------------------

Tensor Tensor::view(Shape shape) const {
    LEVERS_CHECK(shape.numel() == numel(), "view: cannot view a tensor of shape {} as {}", shape_.str(), shape.str());
    Strides strides;
    LEVERS_CHECK(view_strides(shape_, strides_, shape, strides),
                 "view: a tensor of shape {} with strides that do not allow {} (call reshape(), which copies, or "
                 "contiguous() first)",
                 shape_.str(), shape.str());
    Tensor out = as_strided(shape, strides);
    record_reshape("view", *this, out);
    return out;
}

Tensor Tensor::view(std::initializer_list<std::int64_t> sizes) const {
    return view(infer_shape("view", sizes, numel(), shape_));
}

Tensor Tensor::reshape(Shape shape) const {
    LEVERS_CHECK(shape.numel() == numel(), "reshape: a tensor of shape {} cannot be reshaped to {}", shape_.str(),
                 shape.str());
    Strides strides;
    if (view_strides(shape_, strides_, shape, strides)) {
        Tensor out = as_strided(shape, strides);
        record_reshape("reshape", *this, out);
        return out;
    }
    return contiguous().view(shape);
}

Tensor Tensor::reshape(std::initializer_list<std::int64_t> sizes) const {
    return reshape(infer_shape("reshape", sizes, numel(), shape_));
}

Tensor Tensor::flatten(int start, int end) const {
    if (ndim() == 0) return reshape(Shape{1});
    const int s = wrap_dim("flatten", start, ndim()), e = wrap_dim("flatten", end, ndim());
    LEVERS_CHECK(s <= e, "flatten: start dimension {} comes after end dimension {}", start, end);
    Shape sizes;
    for (int d = 0; d < s; ++d) sizes = sizes.appended(shape_[d]);
    std::int64_t merged = 1;
    for (int d = s; d <= e; ++d) merged *= shape_[d];
    sizes = sizes.appended(merged);
    for (int d = e + 1; d < ndim(); ++d) sizes = sizes.appended(shape_[d]);
    return reshape(sizes);
}

Tensor Tensor::unflatten(int dim, std::initializer_list<std::int64_t> sizes) const {
    const int d = wrap_dim("unflatten", dim, ndim());
    const Shape parts = infer_shape("unflatten", sizes, shape_[d], shape_);
    LEVERS_CHECK(parts.numel() == shape_[d], "unflatten: sizes {} do not multiply to dimension {}'s {}", parts.str(), dim,
                 shape_[d]);
    LEVERS_CHECK(ndim() - 1 + parts.ndim() <= Shape::kMaxDims, "unflatten: the result would have more than {} dimensions",
                 Shape::kMaxDims);
    Shape out;
    for (int i = 0; i < ndim(); ++i) {
        if (i != d) {
            out = out.appended(shape_[i]);
            continue;
        }
        for (int j = 0; j < parts.ndim(); ++j) out = out.appended(parts[j]);
    }
    return view(out);
}

Tensor Tensor::unsqueeze(int dim) const {
    const int d = wrap_dim("unsqueeze", dim, ndim() + 1);
    LEVERS_CHECK(ndim() < Shape::kMaxDims, "unsqueeze: a tensor has at most {} dimensions", Shape::kMaxDims);
    Shape sizes;
    Strides strides;
    int k = 0;
    for (int i = 0; i <= ndim(); ++i) {
        if (i == d) {
            sizes = sizes.appended(1);
            strides[k++] = i < ndim() ? strides_[i] * shape_[i] : 1;
        }
        if (i < ndim()) {
            sizes = sizes.appended(shape_[i]);
            strides[k++] = strides_[i];
        }
    }
    Tensor out = as_strided(sizes, strides);
    record_reshape("unsqueeze", *this, out);
    return out;
}

Tensor Tensor::squeeze(int dim) const {
    const int d = wrap_dim("squeeze", dim, ndim());
    if (ndim() == 0 || shape_[d] != 1) return *this;  // PyTorch's rule: a dimension not of size 1 stays
    Shape sizes;
    Strides strides;
    drop_dim(shape_, strides_, d, sizes, strides);
    Tensor out = as_strided(sizes, strides);
    record_reshape("squeeze", *this, out);
    return out;
}

Tensor Tensor::squeeze() const {
    Shape sizes;
    Strides strides;
    for (int i = 0; i < ndim(); ++i)
        if (shape_[i] != 1) {
            strides[sizes.ndim()] = strides_[i];
            sizes = sizes.appended(shape_[i]);
        }
    if (sizes.ndim() == ndim()) return *this;
    Tensor out = as_strided(sizes, strides);
    record_reshape("squeeze", *this, out);
    return out;
}

// --- permutations ------------------------------------------------------------

Tensor Tensor::permute(const Dims& dims) const {
    LEVERS_CHECK(dims.size() == ndim(), "permute: {} dimensions given for a tensor of shape {}", dims.size(),
                 shape_.str());
    std::array<int, Shape::kMaxDims> perm{};
    std::array<bool, Shape::kMaxDims> seen{};
    Shape sizes;
    Strides strides;
    for (int i = 0; i < ndim(); ++i) {
        const int d = wrap_dim("permute", dims[i], ndim());
        LEVERS_CHECK(!seen[static_cast<std::size_t>(d)], "permute: dimension {} appears twice", d);
        seen[static_cast<std::size_t>(d)] = true;
        perm[static_cast<std::size_t>(i)] = d;
        sizes = sizes.appended(shape_[d]);
        strides[i] = strides_[d];
    }
    Tensor out = as_strided(sizes, strides);
    record_permute(*this, out, perm);
    return out;
}

Tensor Tensor::transpose(int dim0, int dim1) const {
    const int a = wrap_dim("transpose", dim0, ndim()), b = wrap_dim("transpose", dim1, ndim());
    Dims dims;
    for (int d = 0; d < ndim(); ++d) dims.push_back(d == a ? b : d == b ? a : d);
    return permute(dims);
}

// --- slices ----------------------------------------------------------------------

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
    LEVERS_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                 "slice [{}, {}) is out of range for shape {}", begin, end, shape_.str());
    return slice(0, begin, end, 1);
}

Tensor Tensor::slice(int dim, std::int64_t begin, std::int64_t end, std::int64_t step) const {
    const int d = wrap_dim("slice", dim, ndim());
    LEVERS_CHECK(ndim() >= 1, "slice: a tensor with no dimensions has nothing to slice");
    LEVERS_CHECK(step >= 1, "slice: step must be at least 1, got {}", step);
    const std::int64_t size = shape_[d];
    if (begin < 0) begin += size;
    if (end < 0) end += size;
    begin = std::clamp<std::int64_t>(begin, 0, size);
    end = std::clamp<std::int64_t>(end, begin, size);
    const std::int64_t count = (end - begin + step - 1) / step;
    Strides strides = strides_;
    strides[d] = strides_[d] * step;
    Tensor out = as_strided(shape_.with_dim(d, count), strides, begin * strides_[d]);
    record_slice(*this, out, d, begin, step, false);
    return out;
}

Tensor Tensor::narrow(int dim, std::int64_t start, std::int64_t length) const {
    const int d = wrap_dim("narrow", dim, ndim());
    LEVERS_CHECK(ndim() >= 1 && start >= 0 && length >= 0 && start + length <= shape_[d],
                 "narrow: {} elements from {} do not fit dimension {} of shape {}", length, start, dim, shape_.str());
    return slice(d, start, start + length, 1);
}

Tensor Tensor::select(int dim, std::int64_t index) const {
    const int d = wrap_dim("select", dim, ndim());
    LEVERS_CHECK(ndim() >= 1, "select: a tensor with no dimensions has nothing to select");
    const std::int64_t size = shape_[d];
    LEVERS_CHECK(-size <= index && index < size, "select: index {} is out of range for dimension {} of shape {}", index,
                 dim, shape_.str());
    if (index < 0) index += size;
    Shape sizes;
    Strides strides;
    drop_dim(shape_, strides_, d, sizes, strides);
    Tensor out = as_strided(sizes, strides, index * strides_[d]);
    record_slice(*this, out, d, index, 1, true);
    return out;
}

// --- broadcasts ------------------------------------------------------------------

Tensor Tensor::expand(Shape shape) const {
    LEVERS_CHECK(shape.ndim() >= ndim(), "expand: a tensor of shape {} cannot expand to fewer dimensions, {}",
                 shape_.str(), shape.str());
    const int lead = shape.ndim() - ndim();
    Strides strides;
    for (int d = 0; d < shape.ndim(); ++d) {
        const int src = d - lead;
        if (src < 0) {
            strides[d] = 0;
            continue;
        }
        LEVERS_CHECK(shape_[src] == shape[d] || shape_[src] == 1,
                     "expand: dimension {} of shape {} is {}, which cannot expand to {} (only size-1 dimensions expand)",
                     src, shape_.str(), shape_[src], shape[d]);
        strides[d] = shape_[src] == shape[d] ? strides_[src] : 0;
    }
    if (shape == shape_) return *this;
    Tensor out = as_strided(shape, strides);
    record_expand(*this, out);
    return out;
}

Tensor Tensor::expand(std::initializer_list<std::int64_t> sizes) const {
    LEVERS_CHECK(static_cast<int>(sizes.size()) <= Shape::kMaxDims, "expand: a shape has at most {} dimensions",
                 Shape::kMaxDims);
    const int lead = static_cast<int>(sizes.size()) - ndim();
    Shape out;
    int i = 0;
    for (std::int64_t size : sizes) {
        if (size == -1) {
            const int src = i - lead;
            LEVERS_CHECK(src >= 0, "expand: -1 is only allowed for the tensor's own dimensions, not new leading ones");
            size = shape_[src];
        }
        out = out.appended(size);
        ++i;
    }
    return expand(out);
}

// --- contiguous copies -------------------------------------------------------------

Tensor Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    Tensor out = empty(shape_, dtype_, device_);
    out.copy_(*this);
    if (recorded(*this))
        autograd::record("contiguous", [](autograd::Backward& g) { g.pass_grad(0, g.grad_out()); }, {this}, {&out});
    return out;
}

}  // namespace levers

#include "levers/kernels/matmul.hpp"


namespace levers::ops {

namespace {

// Whether a matrix view [..., rows, cols] can go to BLAS as it is: unit
// stride along one of its two dimensions, and the other far enough apart.
bool blas_ready(const Tensor& t) {
    const std::int64_t rows = t.dim(-2), cols = t.dim(-1), rs = t.stride(-2), cs = t.stride(-1);
    if ((rows > 1 && rs == 0) || (cols > 1 && cs == 0)) return false;  // repeated rows or columns
    if (rows <= 1 || cols <= 1) return true;                            // a vector: any stride
    return (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
}

// The product of two same-batch operands (already expanded), into a new tensor.
Tensor product(const Tensor& a, const Tensor& b) {
    const Tensor x = blas_ready(a) ? a : a.contiguous(), y = blas_ready(b) ? b : b.contiguous();
    Shape shape = x.shape().with_dim(x.ndim() - 1, y.dim(-1));
    Tensor out = Tensor::empty(shape, x.dtype(), x.device());
    MatmulCall call{.out = arg(out), .a = strided(x), .b = strided(y)};
    run(x, call);
    return out;
}

struct MatmulSaved {
    autograd::SavedTensor a, b;
};

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
    check_float("matmul", "a", a_in);
    check_like("matmul", "b", b_in, "a", a_in);
    LEVERS_CHECK(a_in.ndim() >= 1 && b_in.ndim() >= 1, "matmul: 'a' is {} and 'b' is {}; both need a dimension",
                 describe(a_in), describe(b_in));
    // Vectors as matrices: a row on the left, a column on the right.
    const Tensor a = a_in.ndim() == 1 ? a_in.unsqueeze(0) : a_in;
    const Tensor b = b_in.ndim() == 1 ? b_in.unsqueeze(1) : b_in;
    LEVERS_CHECK(a.dim(-1) == b.dim(-2), "matmul: 'a' {} and 'b' {} do not multiply: {} columns against {} rows",
                 a_in.shape().str(), b_in.shape().str(), a.dim(-1), b.dim(-2));
    // Batch dimensions broadcast; each side expanded to them (views, summed back by autograd).
    Shape batch_a, batch_b;
    for (int d = 0; d < a.ndim() - 2; ++d) batch_a = batch_a.appended(a.dim(d));
    for (int d = 0; d < b.ndim() - 2; ++d) batch_b = batch_b.appended(b.dim(d));
    const Shape batch = broadcast_shapes("matmul", batch_a, batch_b);
    LEVERS_CHECK(batch.ndim() + 2 <= Shape::kMaxDims, "matmul: {} batch dimensions are too many", batch.ndim());
    const Tensor ae = a.expand(batch.appended(a.dim(-2)).appended(a.dim(-1)));
    const Tensor be = b.expand(batch.appended(b.dim(-2)).appended(b.dim(-1)));
    Tensor out = product(ae, be);
    if (auto* s = autograd::record<MatmulSaved>(
            "matmul",
            [](autograd::Backward& g, const MatmulSaved& s) {
                const Tensor& up = g.grad_out();
                if (g.needs_grad(0)) g.set_grad(0, product(up, s.b->mT()));
                if (g.needs_grad(1)) g.set_grad(1, product(s.a->mT(), up));
            },
            {&ae, &be}, {&out}))
        *s = {ae, be};
    // The vectors' dimensions leave the result.
    if (a_in.ndim() == 1) out = out.squeeze(-2);
    if (b_in.ndim() == 1) out = out.squeeze(-1);
    return out;
}

}  // namespace levers::ops

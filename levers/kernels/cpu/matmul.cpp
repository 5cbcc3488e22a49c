// Batched matrix products on the CPU (levers/kernels/matmul.hpp) through Eigen's
// products, which go to OpenBLAS where the build has it. Each operand is
// given to the product as it lies in memory: row-major, or column-major (a
// transposed view), so no copy is made here.
#include "levers/kernels/matmul.hpp"

#include "levers/core/threads.hpp"
#include "levers/kernels/common.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"

#include <Eigen/Core>

#include <algorithm>

namespace levers::kernels::cpu {

namespace {

template <class T> using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class M> using View = Eigen::Map<const M, 0, Eigen::OuterStride<>>;

template <class T, class A, class B>
void multiply(T* out, const T* a, const T* b, index_t m, index_t n, index_t k, MatrixLayout la, MatrixLayout lb, bool accumulate) {
    Eigen::Map<RowMajor<T>> o(out, m, n);
    const A x(a, m, k, Eigen::OuterStride<>(la.ld));
    const B y(b, k, n, Eigen::OuterStride<>(lb.ld));
    if (accumulate)
        o.noalias() += x * y;
    else
        o.noalias() = x * y;
}

template <class T>
void one_product(T* out, const T* a, const T* b, index_t m, index_t n, index_t k, MatrixLayout la, MatrixLayout lb, bool accumulate) {
    if (k == 0) {
        if (!accumulate) std::fill(out, out + m * n, T(0));
        return;
    }
    if (la.row_major && lb.row_major)
        multiply<T, View<RowMajor<T>>, View<RowMajor<T>>>(out, a, b, m, n, k, la, lb, accumulate);
    else if (la.row_major)
        multiply<T, View<RowMajor<T>>, View<ColMajor<T>>>(out, a, b, m, n, k, la, lb, accumulate);
    else if (lb.row_major)
        multiply<T, View<ColMajor<T>>, View<RowMajor<T>>>(out, a, b, m, n, k, la, lb, accumulate);
    else
        multiply<T, View<ColMajor<T>>, View<ColMajor<T>>>(out, a, b, m, n, k, la, lb, accumulate);
}

template <class T> void matmul(const MatmulCall& c) {
    const int nd = c.out.shape.ndim();
    const index_t m = c.out.shape[nd - 2], n = c.out.shape[nd - 1], k = c.a.shape[nd - 1];
    const MatrixLayout la = layout_of(c.a), lb = layout_of(c.b);
    index_t batches = 1;
    for (int d = 0; d < nd - 2; ++d) batches *= c.out.shape[d];
    T* const out = c.out.as<T>();
    const T* const a = c.a.as<const T>();
    const T* const b = c.b.as<const T>();
    // Where each batch's matrices start.
    auto offsets = [&](index_t batch, index_t& at_a, index_t& at_b) {
        at_a = at_b = 0;
        for (int d = nd - 3; d >= 0; --d) {
            const index_t i = batch % c.out.shape[d];
            batch /= c.out.shape[d];
            at_a += i * c.a.strides[d];
            at_b += i * c.b.strides[d];
        }
    };
    // Enough products for every thread: one per thread, each single-threaded
    // inside (a product called in a parallel region runs on its thread;
    // threading each small product costs more than it gains). Fewer, or huge
    // ones: one after another, each using every thread.
    const bool per_thread = threads() > 1 && batches >= threads() && m * n * k <= (index_t{1} << 24);
    parallel_for(batches, per_thread, [&](index_t batch) {
        index_t at_a = 0, at_b = 0;
        offsets(batch, at_a, at_b);
        one_product(out + batch * m * n, a + at_a, b + at_b, m, n, k, la, lb, c.accumulate);
    });
}

LEVERS_KERNEL(MatmulCall, cpu, f32, matmul<float>);
LEVERS_KERNEL(MatmulCall, cpu, f64, matmul<double>);

}  // namespace
}  // namespace levers::kernels::cpu

#include "levers/kernels/cpu/few_rows_product.hpp"

#include "levers/core/error.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace levers::kernels::cpu {

#if defined(__AVX512F__)
namespace {
constexpr int kOutputs = 4, kRows = 4;  // a tile: 4 rows of x against 4 of w, 16 accumulators of 16 lanes

// M rows of x (in apart) against O rows of w (in apart) into y (out apart): lanes of 16 over the first `whole`
// columns, then their sum, then the rest one by one.
template <int M, int O>
void tile(float* y, const float* x, const float* w, index_t in, index_t out, index_t whole) {
    __m512 acc[M][O];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < O; ++j) acc[i][j] = _mm512_setzero_ps();
    for (index_t k = 0; k < whole; k += 16) {
        __m512 wk[O];
        for (int j = 0; j < O; ++j) wk[j] = _mm512_loadu_ps(w + j * in + k);
        for (int i = 0; i < M; ++i) {
            const __m512 xk = _mm512_loadu_ps(x + i * in + k);
            for (int j = 0; j < O; ++j) acc[i][j] = _mm512_fmadd_ps(xk, wk[j], acc[i][j]);
        }
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < O; ++j) {
            alignas(64) float lanes[16];
            _mm512_store_ps(lanes, acc[i][j]);
            float s = 0;
            for (const float l : lanes) s += l;
            for (index_t k = whole; k < in; ++k) s += x[i * in + k] * w[j * in + k];
            y[i * out + j] = s;
        }
}

// Every row of x against O rows of w: four at a time, then one by one (the same sums either way).
template <int O> void rows(float* y, const float* x, const float* w, index_t n, index_t in, index_t out, index_t whole) {
    index_t m = 0;
    for (; m + kRows <= n; m += kRows) tile<kRows, O>(y + m * out, x + m * in, w, in, out, whole);
    for (; m < n; ++m) tile<1, O>(y + m * out, x + m * in, w, in, out, whole);
}
}  // namespace

bool have_few_rows_product() { return true; }

void few_rows_product(float* y, const float* x, const float* w, index_t n, index_t in, index_t out) {
    LEVERS_CHECK(n <= kFewRows, "few_rows_product: {} rows, more than {}", n, kFewRows);
    const index_t whole = in / 16 * 16, blocks = (out + kOutputs - 1) / kOutputs;
#pragma omp parallel for schedule(static)
    for (index_t b = 0; b < blocks; ++b) {
        const index_t o = b * kOutputs;
        if (o + kOutputs <= out) {
            rows<kOutputs>(y + o, x, w + o * in, n, in, out, whole);
        } else {
            for (index_t j = o; j < out; ++j) rows<1>(y + j, x, w + j * in, n, in, out, whole);
        }
    }
}
#else
bool have_few_rows_product() { return false; }

void few_rows_product(float*, const float*, const float*, index_t, index_t, index_t) {
    LEVERS_CHECK(false, "few_rows_product: this build has no AVX-512 (use the general product)");
}
#endif

}  // namespace levers::kernels::cpu

// cuBLAS and cuBLASLt on the emulated GPU: reference products in cuBLAS's
// column-major terms, accumulated in the compute type (f32, or f64), with
// the cuBLASLt epilogues levers asks for (bias, GELU keeping its input,
// GELU's derivative) as NVIDIA documents them. Shapes, leading dimensions,
// attribute sizes and the auxiliary matrix's layout are checked as cuBLAS
// checks them, so a wrong call fails here rather than first on a GPU.
#include "emulated_gpu.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

double get(const void* p, cudaDataType t, std::size_t i) {
    switch (t) {
        case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
        case CUDA_R_32F: return static_cast<const float*>(p)[i];
        default: return static_cast<const double*>(p)[i];
    }
}
void put(void* p, cudaDataType t, std::size_t i, double v) {
    switch (t) {
        case CUDA_R_16BF: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
        case CUDA_R_32F: static_cast<float*>(p)[i] = static_cast<float>(v); break;
        default: static_cast<double*>(p)[i] = v;
    }
}
bool known(cudaDataType t) { return t == CUDA_R_16BF || t == CUDA_R_32F || t == CUDA_R_64F; }

// A[i, p] of op(A) for a column-major A with leading dimension ld.
std::size_t at(bool transposed, std::int64_t i, std::int64_t p, std::int64_t ld) {
    return static_cast<std::size_t>(transposed ? p + i * ld : i + p * ld);
}

// Σ_p op(A)[i, p] · op(B)[p, j], in f32 or f64 as the compute type says.
template <class Acc>
double dot(const void* a, cudaDataType ta, bool trans_a, std::int64_t lda, const void* b, cudaDataType tb,
           bool trans_b, std::int64_t ldb, std::int64_t i, std::int64_t j, std::int64_t k) {
    Acc sum = 0;
    for (std::int64_t p = 0; p < k; ++p)
        sum += static_cast<Acc>(get(a, ta, at(trans_a, i, p, lda))) * static_cast<Acc>(get(b, tb, at(!trans_b, j, p, ldb)));
    return sum;
}

using levers::emulation::drop_handle;
using levers::emulation::make_handle;

std::size_t bytes_of(cudaDataType t) { return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2; }

constexpr double kSqrt2OverPi = 0.7978845608028654, kGeluCubic = 0.044715;
double gelu(double x) { return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x))); }
double gelu_derivative(double x) {
    const double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kGeluCubic * x * x);
}

struct MatmulDesc {
    cublasComputeType_t compute;
    cudaDataType scale;
    std::int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
    std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    void* aux = nullptr;
    std::int64_t aux_ld = 0;
};
struct BlasHandle {
    cudaStream_t stream = nullptr;  // cublasSetStream's
};
struct MatrixLayout {
    cudaDataType type;
    std::uint64_t rows, cols;
    std::int64_t ld;
};

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
    *h = reinterpret_cast<cublasHandle_t>(new BlasHandle);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    reinterpret_cast<BlasHandle*>(h)->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "refused by the emulated GPU's cuBLAS";
}
const char* cublasGetStatusName(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_EMULATED_REFUSAL";
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* a, cudaDataType type_a, int lda,
                                          long long stride_a, const void* b, cudaDataType type_b, int ldb,
                                          long long stride_b, const void* beta, void* c, cudaDataType type_c, int ldc,
                                          long long stride_c, int count, cublasComputeType_t compute,
                                          cublasGemmAlgo_t) {
    const bool trans_a = ta != CUBLAS_OP_N, trans_b = tb != CUBLAS_OP_N;
    if (m < 0 || n < 0 || k < 0 || count < 0 || lda < std::max(1, trans_a ? k : m) ||
        ldb < std::max(1, trans_b ? n : k) || ldc < std::max(1, m)) {
        std::fprintf(stderr, "emulated cuBLAS: gemm m=%d n=%d k=%d lda=%d ldb=%d ldc=%d refused\n", m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const bool f64 = compute == CUBLAS_COMPUTE_64F;
    if (type_a != type_b || type_a != type_c || !known(type_a) || f64 != (type_c == CUDA_R_64F) ||
        !(f64 || compute == CUBLAS_COMPUTE_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const double al = f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
    const double be = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
    // The scalars are read at the call (host pointer mode), the matrices when the stream runs the product.
    levers::emulation::count_product();
    levers::emulation::enqueue(reinterpret_cast<BlasHandle*>(handle)->stream, [=] {
        const std::size_t width = bytes_of(type_a);  // all three types are one, checked above
        for (int batch = 0; batch < count; ++batch) {
            const void* ab = static_cast<const char*>(a) + batch * stride_a * width;
            const void* bb = static_cast<const char*>(b) + batch * stride_b * width;
            void* cb = static_cast<char*>(c) + batch * stride_c * width;
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < m; ++i) {
                    const double s = f64 ? dot<double>(ab, type_a, trans_a, lda, bb, type_b, trans_b, ldb, i, j, k)
                                         : dot<float>(ab, type_a, trans_a, lda, bb, type_b, trans_b, ldb, i, j, k);
                    const std::size_t ci = static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ldc;
                    // beta == 0 does not read C (it may hold NaN), as cuBLAS documents.
                    put(cb, type_c, ci, al * s + (be != 0 ? be * get(cb, type_c, ci) : 0.0));
                }
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    *h = make_handle<cublasLtHandle_t>();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType scale) {
    *d = reinterpret_cast<cublasLtMatmulDesc_t>(new MatmulDesc{compute, scale});
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete reinterpret_cast<MatmulDesc*>(d);
    return CUBLAS_STATUS_SUCCESS;
}
// Each attribute has one size, as cuBLASLt's documentation lists them.
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t handle, cublasLtMatmulDescAttributes_t what,
                                              const void* value, std::size_t bytes) {
    auto* d = reinterpret_cast<MatmulDesc*>(handle);
    void* field = nullptr;
    std::size_t size = 0;
    switch (what) {
        case CUBLASLT_MATMUL_DESC_TRANSA: field = &d->trans_a, size = 4; break;
        case CUBLASLT_MATMUL_DESC_TRANSB: field = &d->trans_b, size = 4; break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE: field = &d->epilogue, size = 4; break;
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: field = &d->bias, size = 8; break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: field = &d->aux, size = 8; break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: field = &d->aux_ld, size = 8; break;
        default:
            std::fprintf(stderr, "emulated cuBLASLt: descriptor attribute %d is not emulated\n", static_cast<int>(what));
            return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (bytes != size) {
        std::fprintf(stderr, "emulated cuBLASLt: attribute %d given %zu bytes, takes %zu\n", static_cast<int>(what),
                     bytes, size);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    std::memcpy(field, value, size);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, std::uint64_t rows,
                                          std::uint64_t cols, std::int64_t ld) {
    if (!known(type) || ld < static_cast<std::int64_t>(std::max<std::uint64_t>(rows, 1)))
        return CUBLAS_STATUS_INVALID_VALUE;
    *l = reinterpret_cast<cublasLtMatrixLayout_t>(new MatrixLayout{type, rows, cols, ld});
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete reinterpret_cast<MatrixLayout*>(l);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    *p = make_handle<cublasLtMatmulPreference_t>();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    drop_handle(p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t what,
                                                    const void*, std::size_t bytes) {
    const std::size_t size = what == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ? 8 : 4;
    return bytes == size ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int wanted,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
    if (wanted < 1) return CUBLAS_STATUS_INVALID_VALUE;
    std::memset(results, 0, sizeof *results);
    results->state = CUBLAS_STATUS_SUCCESS;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// D = alpha·op(A)·op(B) + beta·C, then the epilogue: BIAS adds bias[i] to
// row i of D; GELU_AUX_BIAS stores that sum in the auxiliary matrix (D's
// type, leading dimension EPILOGUE_AUX_LD) and writes GELU (tanh form) of
// it; DGELU multiplies the product by GELU's derivative at the auxiliary
// matrix's values.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t handle, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t la, const void* b, cublasLtMatrixLayout_t lb, const void* beta,
                              const void* c, cublasLtMatrixLayout_t lc, void* d, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t*, void*, std::size_t, cudaStream_t stream) {
    // Copies: the caller may change or destroy the descriptors before the stream runs the product.
    const MatmulDesc desc = *reinterpret_cast<const MatmulDesc*>(handle);
    const MatrixLayout A = *reinterpret_cast<const MatrixLayout*>(la), B = *reinterpret_cast<const MatrixLayout*>(lb),
                       C = *reinterpret_cast<const MatrixLayout*>(lc), D = *reinterpret_cast<const MatrixLayout*>(ld);
    const bool trans_a = desc.trans_a != CUBLAS_OP_N, trans_b = desc.trans_b != CUBLAS_OP_N;
    const std::uint64_t m = D.rows, n = D.cols, k = trans_a ? A.rows : A.cols;
    if ((trans_a ? A.cols : A.rows) != m || (trans_b ? B.cols : B.rows) != k || (trans_b ? B.rows : B.cols) != n ||
        C.rows != m || C.cols != n || C.type != D.type) {
        std::fprintf(stderr, "emulated cuBLASLt: shapes A %lux%lu%s, B %lux%lu%s, D %lux%lu do not multiply\n",
                     A.rows, A.cols, trans_a ? "ᵀ" : "", B.rows, B.cols, trans_b ? "ᵀ" : "", m, n);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F || A.type != B.type) return CUBLAS_STATUS_NOT_SUPPORTED;
    const std::uint32_t e = desc.epilogue;
    const bool bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool keeps_input = e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS, derivative = e == CUBLASLT_EPILOGUE_DGELU;
    if (!bias && !derivative && e != CUBLASLT_EPILOGUE_DEFAULT) {
        std::fprintf(stderr, "emulated cuBLASLt: epilogue %u is not emulated\n", e);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (bias && !desc.bias) return CUBLAS_STATUS_INVALID_VALUE;
    if ((keeps_input || derivative) &&
        (!desc.aux || desc.aux_ld < static_cast<std::int64_t>(m) || desc.aux_ld % 8 != 0)) {
        std::fprintf(stderr, "emulated cuBLASLt: auxiliary matrix %p with leading dimension %ld for %lu rows\n",
                     desc.aux, static_cast<long>(desc.aux_ld), m);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const double al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    levers::emulation::count_product();
    levers::emulation::enqueue(stream, [=] {
        for (std::uint64_t j = 0; j < n; ++j)
            for (std::uint64_t i = 0; i < m; ++i) {
                const std::int64_t ii = static_cast<std::int64_t>(i), jj = static_cast<std::int64_t>(j);
                double v = al * dot<float>(a, A.type, trans_a, A.ld, b, B.type, trans_b, B.ld, ii, jj,
                                           static_cast<std::int64_t>(k));
                if (be != 0) v += be * get(c, C.type, i + j * C.ld);
                if (bias) v += get(desc.bias, D.type, i);
                const std::size_t aux_at = i + j * static_cast<std::size_t>(desc.aux_ld);
                if (keeps_input) {
                    put(desc.aux, D.type, aux_at, v);
                    v = gelu(v);
                }
                if (derivative) v *= gelu_derivative(get(desc.aux, D.type, aux_at));
                put(d, D.type, i + j * D.ld, v);
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

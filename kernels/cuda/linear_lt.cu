// The linear layer through cuBLASLt: one matrix product whose epilogue adds
// the bias (and applies GELU, keeping its input for backward). Descriptors
// are made per call (microseconds on the host, beside a product of
// milliseconds); the workspace is one allocation per thread.
#include "kernels/cuda/blas.cuh"

#include <cublasLt.h>

#include <cstdint>

namespace levers::kernels::cuda {

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;

struct LtThread {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    LtThread() {
        LEVERS_CUBLAS_CHECK(cublasLtCreate(&handle));
        LEVERS_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    }
};
LtThread& lt() {
    thread_local LtThread t;
    return t;
}

// Owners of the descriptors, destroyed on every path out.
struct Desc {
    cublasLtMatmulDesc_t d = nullptr;
    ~Desc() { cublasLtMatmulDescDestroy(d); }
};
struct Layout {
    cublasLtMatrixLayout_t l = nullptr;
    Layout(cudaDataType t, index_t rows, index_t cols, index_t ld) {
        LEVERS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, static_cast<std::uint64_t>(rows),
                                                       static_cast<std::uint64_t>(cols),
                                                       static_cast<std::int64_t>(ld)));
    }
    ~Layout() { cublasLtMatrixLayoutDestroy(l); }
};
struct Preference {
    cublasLtMatmulPreference_t p = nullptr;
    ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
};

template <class V> void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t what, const V& value) {
    LEVERS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, what, &value, sizeof value));
}
template <class V> void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t what, const V& value) {
    LEVERS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, what, &value, sizeof value));
}

// The largest power of two (up to 256) dividing the address: what the
// heuristic may assume about a matrix's alignment.
std::uint32_t alignment(const void* p) {
    std::uint32_t a = 256;
    while (a > 1 && reinterpret_cast<std::uintptr_t>(p) % a != 0) a /= 2;
    return a;
}

}  // namespace

template <class S>
bool linear_epilogue(S* out, S* pre_gelu, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim,
                     index_t out_dim, cudaStream_t stream) {
    if constexpr (sizeof(S) == 8) {
        return false;  // no epilogue kernels for doubles; the plain path serves the f64 checks
    } else {
        if (!bias || reinterpret_cast<std::uintptr_t>(bias) % 16 != 0) return false;
        if (pre_gelu && (out_dim % 8 != 0 || alignment(pre_gelu) < 16)) return false;
        constexpr cudaDataType t = data_type<S>();
        Desc desc;
        LEVERS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        // out'[out, n] = W'ᵀ · in' in column-major terms (W' = W seen as [in, out]).
        set(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(CUBLAS_OP_T));
        set(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(CUBLAS_OP_N));
        const auto epilogue = pre_gelu ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
        set(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(epilogue));
        set(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
        if (pre_gelu) {
            set(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(pre_gelu));
            set(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(out_dim));
        }
        const Layout a(t, in_dim, out_dim, in_dim), b(t, in_dim, n, in_dim), d(t, out_dim, n, out_dim);

        Preference pref;
        LEVERS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
        set(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(kWorkspaceBytes));
        set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(weight));
        set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(in));
        set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(out));
        set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(out));

        LtThread& thread = lt();
        cublasLtMatmulHeuristicResult_t best{};
        int found = 0;
        if (cublasLtMatmulAlgoGetHeuristic(thread.handle, desc.d, a.l, b.l, d.l, d.l, pref.p, 1, &best, &found) !=
                CUBLAS_STATUS_SUCCESS ||
            found == 0)
            return false;
        const float alpha = 1, beta = 0;
        LEVERS_CUBLAS_CHECK(cublasLtMatmul(thread.handle, desc.d, &alpha, weight, a.l, in, b.l, &beta, out, d.l, out,
                                           d.l, &best.algo, thread.workspace, kWorkspaceBytes, stream));
        return true;
    }
}

template bool linear_epilogue<float>(float*, float*, const float*, const float*, const float*, index_t, index_t,
                                     index_t, cudaStream_t);
template bool linear_epilogue<double>(double*, double*, const double*, const double*, const double*, index_t, index_t,
                                      index_t, cudaStream_t);
template bool linear_epilogue<bf16>(bf16*, bf16*, const bf16*, const bf16*, const bf16*, index_t, index_t, index_t,
                                    cudaStream_t);

}  // namespace levers::kernels::cuda

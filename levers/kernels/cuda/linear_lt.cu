// The linear layer through cuBLASLt: one matrix product whose epilogue adds
// the bias (and applies GELU, keeping its input for backward), and the
// backward product whose epilogue applies GELU's derivative. Descriptors
// and the chosen algorithm are kept per shape and thread; the workspace is
// one allocation per thread.
#include "levers/kernels/cuda/blas.cuh"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace levers::kernels::cuda {

void* workspace_memory(std::size_t bytes);  // runtime.cpp: levers' allocator, a full GPU an OutOfMemory

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // also in the memory plan's reserve (levers/recipe/memory_plan.cpp)

struct LtThread {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    LtThread() {
        LEVERS_CUBLAS_CHECK(cublasLtCreate(&handle));
        workspace = workspace_memory(kWorkspaceBytes);
    }
};
LtThread& lt() {
    thread_local LtThread t;
    return t;
}

// The largest power of two (up to 256) dividing the address: what the
// heuristic may assume about a matrix's alignment.
std::uint32_t alignment(const void* p) {
    std::uint32_t a = 256;
    while (a > 1 && reinterpret_cast<std::uintptr_t>(p) % a != 0) a /= 2;
    return a;
}

template <class V> void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t what, const V& value) {
    LEVERS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, what, &value, sizeof value));
}
template <class V> void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t what, const V& value) {
    LEVERS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, what, &value, sizeof value));
}

// What decides the algorithm: type, orientation, shape, epilogue and the
// alignments. In cuBLAS's column-major terms D[m, n] = op(A)[m, k] · B[k, n]:
// the forward has A = W' [in, out] transposed (m = out, k = in); the GELU
// backward has A = W' untransposed (m = in, k = out). D's rows are m apart,
// and so are the auxiliary (GELU input) matrix's.
struct PlanKey {
    cudaDataType type;
    bool transpose_a;
    index_t m, n, k, ldb;
    cublasLtEpilogue_t epilogue;
    std::uint32_t align_a, align_b, align_d;
    bool operator<(const PlanKey& o) const {
        return std::tie(type, transpose_a, m, n, k, ldb, epilogue, align_a, align_b, align_d) <
               std::tie(o.type, o.transpose_a, o.m, o.n, o.k, o.ldb, o.epilogue, o.align_a, o.align_b, o.align_d);
    }
};

// A shape's descriptors and chosen algorithm, made once per thread (the
// heuristic costs tens of microseconds, as much as a small product): each
// call only sets its bias and auxiliary pointers.
struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulHeuristicResult_t algo{};
    bool usable = false;  // cuBLASLt offered an algorithm
    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {
        cublasLtMatrixLayoutDestroy(a);
        cublasLtMatrixLayoutDestroy(b);
        cublasLtMatrixLayoutDestroy(d);
        cublasLtMatmulDescDestroy(desc);
    }
};

cublasLtMatrixLayout_t layout(cudaDataType t, index_t rows, index_t cols, index_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    LEVERS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, static_cast<std::uint64_t>(rows),
                                                   static_cast<std::uint64_t>(cols), static_cast<std::int64_t>(ld)));
    return l;
}

std::unique_ptr<Plan> make_plan(const PlanKey& k) {
    auto plan = std::make_unique<Plan>();
    LEVERS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
        static_cast<std::int32_t>(k.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N));
    set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(CUBLAS_OP_N));
    set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(k.epilogue));
    if (k.epilogue != CUBLASLT_EPILOGUE_BIAS)
        set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(k.m));
    // W' is [in, out] with rows `in` apart in either orientation.
    plan->a = k.transpose_a ? layout(k.type, k.k, k.m, k.k) : layout(k.type, k.m, k.k, k.m);
    plan->b = layout(k.type, k.k, k.n, k.ldb);
    plan->d = layout(k.type, k.m, k.n, k.m);

    cublasLtMatmulPreference_t pref = nullptr;
    LEVERS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(kWorkspaceBytes));
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_a);
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_b);
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_d);
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_d);
    int found = 0;
    const auto status = cublasLtMatmulAlgoGetHeuristic(lt().handle, plan->desc, plan->a, plan->b, plan->d, plan->d,
                                                       pref, 1, &plan->algo, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    plan->usable = status == CUBLAS_STATUS_SUCCESS && found > 0;
    return plan;
}

// Runs D = op(A)·B with the key's epilogue, its bias and auxiliary pointers
// set (either may be null); false, having queued nothing, where cuBLASLt has
// no algorithm for it.
bool run_plan(const PlanKey& key, void* d, const void* a, const void* b, const void* bias, const void* aux,
              cudaStream_t stream) {
    thread_local std::map<PlanKey, std::unique_ptr<Plan>> plans;
    auto& plan = plans[key];
    if (!plan) plan = make_plan(key);
    if (!plan->usable) return false;
    if (bias) set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    if (aux) set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    const float alpha = 1, beta = 0;
    LtThread& thread = lt();
    // An algorithm the heuristic offered but the call refuses (shapes it
    // did not foresee) sends this shape to the plain path from now on.
    const auto status = cublasLtMatmul(thread.handle, plan->desc, &alpha, a, plan->a, b, plan->b, &beta, d, plan->d,
                                       d, plan->d, &plan->algo.algo, thread.workspace, kWorkspaceBytes, stream);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
        plan->usable = false;
        return false;
    }
    LEVERS_CUBLAS_CHECK(status);
    return true;
}

}  // namespace

template <class S>
bool linear_epilogue(S* out, S* pre_gelu, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim,
                     index_t out_dim, cudaStream_t stream) {
    if constexpr (sizeof(S) == 8) {
        return false;  // no epilogue kernels for doubles; the plain path serves the f64 checks
    } else {
        if (!bias || alignment(bias) < 16) return false;
        if (pre_gelu && (out_dim % 8 != 0 || alignment(pre_gelu) < 16)) return false;
        const PlanKey key{data_type<S>(), true, out_dim, n, in_dim, in_dim,
                          pre_gelu ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS,
                          alignment(weight), alignment(in), alignment(out)};
        return run_plan(key, out, weight, in, bias, pre_gelu, stream);
    }
}

template <class S>
bool linear_dgelu_epilogue(S* d_pre, const S* pre, const S* d_out, const S* weight, index_t n, index_t in_dim,
                           index_t out_dim, index_t out_ld, cudaStream_t stream) {
    if constexpr (sizeof(S) == 8) {
        return false;
    } else {
        if (in_dim % 8 != 0 || alignment(pre) < 16) return false;
        const PlanKey key{data_type<S>(),   false,           in_dim,          n, out_dim, out_ld,
                          CUBLASLT_EPILOGUE_DGELU, alignment(weight), alignment(d_out), alignment(d_pre)};
        return run_plan(key, d_pre, weight, d_out, nullptr, pre, stream);
    }
}

template bool linear_epilogue<float>(float*, float*, const float*, const float*, const float*, index_t, index_t,
                                     index_t, cudaStream_t);
template bool linear_epilogue<double>(double*, double*, const double*, const double*, const double*, index_t, index_t,
                                      index_t, cudaStream_t);
template bool linear_epilogue<bf16>(bf16*, bf16*, const bf16*, const bf16*, const bf16*, index_t, index_t, index_t,
                                    cudaStream_t);
template bool linear_dgelu_epilogue<float>(float*, const float*, const float*, const float*, index_t, index_t, index_t,
                                           index_t, cudaStream_t);
template bool linear_dgelu_epilogue<double>(double*, const double*, const double*, const double*, index_t, index_t,
                                            index_t, index_t, cudaStream_t);
template bool linear_dgelu_epilogue<bf16>(bf16*, const bf16*, const bf16*, const bf16*, index_t, index_t, index_t,
                                          index_t, cudaStream_t);

}  // namespace levers::kernels::cuda

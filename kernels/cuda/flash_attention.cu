// Causal self-attention without the [time, time] matrices (flash-style): a
// block holds a tile of 64 queries (or keys) in shared memory, walks the key
// (or query) tiles the causal mask lets through, and multiplies 16x16 bf16
// fragments on the tensor cores (WMMA) with f32 accumulators. Forward keeps
// a running max and sum per query row (online softmax) and saves the row's
// log-sum-exp; backward recomputes the probabilities from it, dK and dV in
// one kernel per key tile and dQ in another per query tile, so every sum has
// a fixed order (no atomics). Head size 64, bf16 storage; the layouts of
// kernels/attention.hpp (qkv [B, T, 3C], y [B, T, C]).
#include "kernels/flash_attention.hpp"
#include "kernels/cuda/register.cuh"
#include "kernels/cuda/device_math.cuh"

#include <mma.h>

#include <cmath>
#include <cstdint>

namespace levers::kernels::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kD = 64;         // head size
constexpr int kTile = 64;      // queries or keys per tile
constexpr int kWarps = 4;      // each owns 16 rows of the block's tile
constexpr int kThreads = 32 * kWarps;
constexpr int kLdH = kD + 8;   // bf16 tile rows, padded against bank conflicts (a multiple of 8)
constexpr int kLdF = kTile + 4;  // f32 score rows (a multiple of 4)
constexpr int kLdP = kTile + 8;  // bf16 probability rows

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Shared memory is carved by hand: every piece starts on a 128-byte boundary,
// which WMMA's loads and stores (32-byte alignment) need.
struct Carve {
    char* at;
    template <class T> __device__ T* take(int elems) {
        T* p = reinterpret_cast<T*>(at);
        at += (static_cast<std::size_t>(elems) * sizeof(T) + 127) / 128 * 128;
        return p;
    }
};
constexpr std::size_t piece(std::size_t bytes) { return (bytes + 127) / 128 * 128; }
constexpr std::size_t kTileBytes = piece(kTile * kLdH * sizeof(bf16));
constexpr std::size_t kScoreBytes = piece(kWarps * 16 * kLdF * sizeof(float));
constexpr std::size_t kProbBytes = piece(kWarps * 16 * kLdP * sizeof(bf16));
constexpr std::size_t kRowBytes = piece(kTile * sizeof(float));
constexpr std::size_t kForwardShared = 3 * kTileBytes + 2 * kScoreBytes + kProbBytes + 2 * kRowBytes;
constexpr std::size_t kBackwardShared = 4 * kTileBytes + 2 * kScoreBytes + kProbBytes + 2 * kRowBytes;

// Rows [row0, row0 + 64) of one head's 64 channels into a tile, zeros past
// the sequence's end: `head` is row 0's first channel, rows `stride` apart.
// 16 bytes (8 channels) per load; the launchers check the alignment.
__device__ void load_head_rows(bf16* tile, const bf16* head, index_t stride, index_t row0, index_t time) {
    constexpr int kVec = 8, kPerRow = kD / kVec;
    for (int i = threadIdx.x; i < kTile * kPerRow; i += kThreads) {
        const int r = i / kPerRow, c = i % kPerRow * kVec;
        const index_t t = row0 + r;
        uint4 value = make_uint4(0, 0, 0, 0);  // bf16 zeros
        if (t < time) value = *reinterpret_cast<const uint4*>(head + t * stride + c);
        *reinterpret_cast<uint4*>(tile + r * kLdH + c) = value;
    }
}

// Rows of one head's q, k or v (`part` 0, 1, 2) of qkv [B, T, 3C].
__device__ void load_tile(bf16* tile, const bf16* qkv, index_t b, index_t h, int part, index_t row0, index_t time,
                          index_t channels) {
    load_head_rows(tile, qkv + b * time * 3 * channels + part * channels + h * kD, 3 * channels, row0, time);
}

// Rows of y-shaped arrays ([B, T, C], this head's 64 channels).
__device__ void load_rows(bf16* tile, const bf16* x, index_t b, index_t h, index_t row0, index_t time,
                          index_t channels) {
    load_head_rows(tile, x + b * time * channels + h * kD, channels, row0, time);
}

// out[16 x 64] (f32, ld kLdF) = a[16 x 64] · bᵀ where b is [64 x 64] row-major
// (ld kLdH): the warp's rows against every row of the other tile.
__device__ void rows_times_rows(float* out, const bf16* a, const bf16* b) {
    FragA fa[kD / 16];  // the warp's rows, loaded once for the four column blocks
    for (int k = 0; k < kD / 16; ++k) wmma::load_matrix_sync(fa[k], a + k * 16, kLdH);
    for (int n = 0; n < kTile / 16; ++n) {
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < kD / 16; ++k) {
            FragBCol fb;
            wmma::load_matrix_sync(fb, b + n * 16 * kLdH + k * 16, kLdH);
            wmma::mma_sync(acc, fa[k], fb, acc);
        }
        wmma::store_matrix_sync(out + n * 16, acc, kLdF, wmma::mem_row_major);
    }
}

// acc[n] += p[16 x 64] (bf16, ld kLdP) · b[64 x 64] row-major (ld kLdH), n over the 4 column blocks.
__device__ void accumulate(FragC (&acc)[kD / 16], const bf16* p, const bf16* b) {
    for (int k = 0; k < kTile / 16; ++k) {
        FragA fa;
        wmma::load_matrix_sync(fa, p + k * 16, kLdP);
        for (int n = 0; n < kD / 16; ++n) {
            FragBRow fb;
            wmma::load_matrix_sync(fb, b + k * 16 * kLdH + n * 16, kLdH);
            wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
}

// Writes a warp's 16 x 64 accumulators, times `scale`, into rows of a
// [B, T, stride] array at `column` (rows past the end are dropped), through
// the warp's f32 scratch.
__device__ void write_rows(bf16* out, FragC (&acc)[kD / 16], float* scratch, float scale, index_t b, index_t row0,
                           index_t time, index_t stride, index_t column) {
    for (int n = 0; n < kD / 16; ++n) wmma::store_matrix_sync(scratch + n * 16, acc[n], kLdF, wmma::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x % 32;
    for (int r = 0; r < 16; ++r) {
        const index_t t = row0 + r;
        if (t >= time) break;
        for (int c = lane; c < kD; c += 32)
            out[(b * time + t) * stride + column + c] = __float2bfloat16_rn(scratch[r * kLdF + c] * scale);
    }
}

// One key tile's step of the online softmax for a warp's 16 query rows
// (first query `t0`): from the scores `s`, the probabilities `p` against the
// rows' running max, the output rows `o` rescaled to it, the max and sum
// updated. Two lanes per row, each over half the tile's keys (lane ^ 16 has
// the other half), so a row costs two shuffles rather than two warp-wide
// reductions; each lane starts its half at a staggered column, so at every
// step the 32 lanes touch 32 different banks of `s` and `o` (row stride
// kLdF = 68 words: lane (r, h) starts on bank 5r + 16h mod 32).
__device__ void online_softmax(const float* s, float* o, bf16* p, float* row_max, float* row_sum, index_t t0,
                               index_t k0, index_t time, float scale) {
    const int lane = threadIdx.x % 32, r = lane % 16, half = lane / 16, start = r + 16 * half;
    const index_t t = t0 + r;
    auto column = [&](int i) { return half * 32 + (i + start) % 32; };
    float x[32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int j = column(i);
        const index_t key = k0 + j;
        x[i] = key <= t && key < time ? s[r * kLdF + j] * scale : -INFINITY;
        m = fmaxf(m, x[i]);
    }
    m = fmaxf(m, __shfl_xor_sync(kFullWarp, m, 16));
    const float old_max = row_max[r], old_sum = row_sum[r];
    const float new_max = fmaxf(old_max, m);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // a row that sees no key yet
    float sum = 0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const float e = __expf(x[i] - base);
        sum += e;
        p[r * kLdP + column(i)] = __float2bfloat16_rn(e);
    }
    sum += __shfl_xor_sync(kFullWarp, sum, 16);
    const float rescale = __expf(old_max - base);
#pragma unroll
    for (int i = 0; i < 32; ++i) o[r * kLdF + column(i)] *= rescale;  // the output's 64 columns, split alike
    __syncwarp();  // both halves have read the old max and sum
    if (half == 0) {
        row_max[r] = new_max;
        row_sum[r] = old_sum * rescale + sum;
    }
}

// A query tile walks every key tile up to it, so the last tiles cost the
// most: they run first (blocks start in grid order), leaving light ones for
// the tail instead of a last wave of heavy ones.
__device__ index_t heavy_first(unsigned tile) { return static_cast<index_t>(gridDim.y - 1 - tile); }

__global__ void __launch_bounds__(kThreads)
    forward_kernel(bf16* y, float* lse, const bf16* qkv, index_t time, index_t channels, index_t heads, float scale) {
    extern __shared__ __align__(128) char shared[];
    Carve carve{shared};
    bf16 *q = carve.take<bf16>(kTile * kLdH), *k = carve.take<bf16>(kTile * kLdH), *v = carve.take<bf16>(kTile * kLdH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* s = carve.take<float>(kWarps * 16 * kLdF) + warp * 16 * kLdF;
    float* o = carve.take<float>(kWarps * 16 * kLdF) + warp * 16 * kLdF;  // the output rows, rescaled as max moves
    bf16* p = carve.take<bf16>(kWarps * 16 * kLdP) + warp * 16 * kLdP;
    float *row_max = carve.take<float>(kTile), *row_sum = carve.take<float>(kTile);
    const index_t b = blockIdx.x / heads, h = blockIdx.x % heads, q0 = heavy_first(blockIdx.y) * kTile;

    load_tile(q, qkv, b, h, 0, q0, time, channels);
    for (int i = lane; i < 16 * kLdF; i += 32) o[i] = 0;
    if (lane < 16) {
        row_max[warp * 16 + lane] = -INFINITY;
        row_sum[warp * 16 + lane] = 0;
    }
    const index_t last = (q0 + kTile < time ? q0 + kTile : time) - 1;  // the last key any row here sees
    for (index_t k0 = 0; k0 <= last; k0 += kTile) {
        __syncthreads();  // every warp is done with the previous K and V
        load_tile(k, qkv, b, h, 1, k0, time, channels);
        load_tile(v, qkv, b, h, 2, k0, time, channels);
        __syncthreads();
        rows_times_rows(s, q + warp * 16 * kLdH, k);
        __syncwarp();
        online_softmax(s, o, p, row_max + warp * 16, row_sum + warp * 16, q0 + warp * 16, k0, time, scale);
        __syncwarp();
        FragC acc[kD / 16];
        for (int n = 0; n < kD / 16; ++n) wmma::load_matrix_sync(acc[n], o + n * 16, kLdF, wmma::mem_row_major);
        accumulate(acc, p, v);
        for (int n = 0; n < kD / 16; ++n) wmma::store_matrix_sync(o + n * 16, acc[n], kLdF, wmma::mem_row_major);
        __syncwarp();
    }
    for (int r = 0; r < 16; ++r) {
        const index_t t = q0 + warp * 16 + r;
        if (t >= time) break;
        const float m = row_max[warp * 16 + r], l = row_sum[warp * 16 + r];
        for (int c = lane; c < kD; c += 32)
            y[(b * time + t) * channels + h * kD + c] = __float2bfloat16_rn(o[r * kLdF + c] / l);
        if (lane == 0) lse[blockIdx.x * time + t] = m + logf(l);
    }
}

// dot[(b·H + h)·T + t] = Σ_c d_y · y over the head's channels: the softmax
// backward's row term, one warp per row.
__global__ void row_dot_kernel(float* dot, const bf16* d_y, const bf16* y, index_t rows, index_t time,
                               index_t channels, index_t heads) {
    const index_t row = blockIdx.x * static_cast<index_t>(kWarps) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const index_t bh = row / time, t = row % time, b = bh / heads, h = bh % heads;
    const index_t at = (b * time + t) * channels + h * kD;
    float sum = 0;
    for (int c = lane; c < kD; c += 32) sum += load(d_y[at + c]) * load(y[at + c]);
    sum = warp_sum(sum);
    if (lane == 0) dot[row] = sum;
}

// Loads the per-row log-sum-exp and dot of a query tile; rows past the end
// get +inf, so their probabilities are 0.
__device__ void load_row_terms(float* tile_lse, float* tile_dot, const float* lse, const float* dot, index_t bh,
                               index_t q0, index_t time) {
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
        const index_t t = q0 + i;
        tile_lse[i] = t < time ? lse[bh * time + t] : INFINITY;
        tile_dot[i] = t < time ? dot[bh * time + t] : 0.0f;
    }
}

// The backward kernels' shared memory: the key tile's K and V, the query
// tile's Q and dO, this warp's two f32 blocks (scores or probabilities, and
// dP) and bf16 operand block, and the query rows' log-sum-exp and dot.
struct BackwardShared {
    bf16 *k, *v, *q, *dout;
    float *scores, *dp;
    bf16* operand;
    float *lse, *dot;
    __device__ explicit BackwardShared(char* shared) {
        Carve carve{shared};
        k = carve.take<bf16>(kTile * kLdH);
        v = carve.take<bf16>(kTile * kLdH);
        q = carve.take<bf16>(kTile * kLdH);
        dout = carve.take<bf16>(kTile * kLdH);
        const int warp = threadIdx.x / 32;
        scores = carve.take<float>(kWarps * 16 * kLdF) + warp * 16 * kLdF;
        dp = carve.take<float>(kWarps * 16 * kLdF) + warp * 16 * kLdF;
        operand = carve.take<bf16>(kWarps * 16 * kLdP) + warp * 16 * kLdP;
        lse = carve.take<float>(kTile);
        dot = carve.take<float>(kTile);
    }
};

// One block per key tile: dV = Σ_q Pᵀ dO and dK = scale · Σ_q dSᵀ Q over the
// query tiles at or after it.
__global__ void __launch_bounds__(kThreads)
    backward_kv_kernel(bf16* d_qkv, const bf16* d_y, const float* lse, const float* dot, const bf16* qkv,
                       index_t time, index_t channels, index_t heads, float scale) {
    extern __shared__ __align__(128) char shared[];
    const BackwardShared m(shared);
    bf16 *k = m.k, *v = m.v, *q = m.q, *dout = m.dout, *operand = m.operand;  // operand: Pᵀ, then dSᵀ
    float *pt = m.scores, *dpt = m.dp, *tile_lse = m.lse, *tile_dot = m.dot;   // Pᵀ: this warp's keys x queries
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // Key tile 0 meets every query tile: the heaviest blocks already come first.
    const index_t bh = blockIdx.x, b = bh / heads, h = bh % heads, k0 = static_cast<index_t>(blockIdx.y) * kTile;

    load_tile(k, qkv, b, h, 1, k0, time, channels);
    load_tile(v, qkv, b, h, 2, k0, time, channels);
    FragC dk[kD / 16], dv[kD / 16];
    for (int n = 0; n < kD / 16; ++n) {
        wmma::fill_fragment(dk[n], 0.0f);
        wmma::fill_fragment(dv[n], 0.0f);
    }
    for (index_t q0 = k0 / kTile * kTile; q0 < time; q0 += kTile) {
        __syncthreads();
        load_tile(q, qkv, b, h, 0, q0, time, channels);
        load_rows(dout, d_y, b, h, q0, time, channels);
        load_row_terms(tile_lse, tile_dot, lse, dot, bh, q0, time);
        __syncthreads();
        rows_times_rows(pt, k + warp * 16 * kLdH, q);      // Sᵀ = K Qᵀ
        rows_times_rows(dpt, v + warp * 16 * kLdH, dout);  // dPᵀ = V dOᵀ
        __syncwarp();
        for (int r = 0; r < 16; ++r) {
            const index_t key = k0 + warp * 16 + r;
            for (int j = lane; j < kTile; j += 32) {
                const index_t t = q0 + j;
                const float prob = t >= key ? __expf(pt[r * kLdF + j] * scale - tile_lse[j]) : 0.0f;
                pt[r * kLdF + j] = prob;
                operand[r * kLdP + j] = __float2bfloat16_rn(prob);
            }
        }
        __syncwarp();
        accumulate(dv, operand, dout);  // dV += Pᵀ dO
        __syncwarp();
        for (int r = 0; r < 16; ++r)
            for (int j = lane; j < kTile; j += 32)
                operand[r * kLdP + j] = __float2bfloat16_rn(pt[r * kLdF + j] * (dpt[r * kLdF + j] - tile_dot[j]));
        __syncwarp();
        accumulate(dk, operand, q);  // dK += dSᵀ Q (scaled when written)
    }
    __syncwarp();
    const index_t row0 = k0 + warp * 16;
    write_rows(d_qkv, dk, pt, scale, b, row0, time, 3 * channels, channels + h * kD);
    __syncwarp();
    write_rows(d_qkv, dv, pt, 1.0f, b, row0, time, 3 * channels, 2 * channels + h * kD);
}

// One block per query tile: dQ = scale · Σ_k dS K over the key tiles up to it.
__global__ void __launch_bounds__(kThreads)
    backward_q_kernel(bf16* d_qkv, const bf16* d_y, const float* lse, const float* dot, const bf16* qkv,
                      index_t time, index_t channels, index_t heads, float scale) {
    extern __shared__ __align__(128) char shared[];
    const BackwardShared m(shared);
    bf16 *q = m.q, *dout = m.dout, *k = m.k, *v = m.v, *ds = m.operand;
    float *s = m.scores, *dp = m.dp, *tile_lse = m.lse, *tile_dot = m.dot;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const index_t bh = blockIdx.x, b = bh / heads, h = bh % heads, q0 = heavy_first(blockIdx.y) * kTile;

    load_tile(q, qkv, b, h, 0, q0, time, channels);
    load_rows(dout, d_y, b, h, q0, time, channels);
    load_row_terms(tile_lse, tile_dot, lse, dot, bh, q0, time);
    FragC dq[kD / 16];
    for (int n = 0; n < kD / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);
    const index_t last = (q0 + kTile < time ? q0 + kTile : time) - 1;
    for (index_t k0 = 0; k0 <= last; k0 += kTile) {
        __syncthreads();
        load_tile(k, qkv, b, h, 1, k0, time, channels);
        load_tile(v, qkv, b, h, 2, k0, time, channels);
        __syncthreads();
        rows_times_rows(s, q + warp * 16 * kLdH, k);      // S = Q Kᵀ
        rows_times_rows(dp, dout + warp * 16 * kLdH, v);  // dP = dO Vᵀ
        __syncwarp();
        for (int r = 0; r < 16; ++r) {
            const int row = warp * 16 + r;
            const index_t t = q0 + row;
            for (int j = lane; j < kTile; j += 32) {
                const index_t key = k0 + j;
                const float prob =
                    key <= t && key < time ? __expf(s[r * kLdF + j] * scale - tile_lse[row]) : 0.0f;
                ds[r * kLdP + j] = __float2bfloat16_rn(prob * (dp[r * kLdF + j] - tile_dot[row]));
            }
        }
        __syncwarp();
        accumulate(dq, ds, k);  // dQ += dS K
    }
    __syncwarp();
    write_rows(d_qkv, dq, s, scale, b, q0 + warp * 16, time, 3 * channels, h * kD);
}

// (batch·head, tile): batch·heads on x, whose limit is 2^31 - 1, rather than
// on y (65535), which then caps the sequence at 4M tokens instead.
dim3 tile_grid(index_t heads_in_batch, index_t time) {
    if (blocks_for(time, kTile) > 65535)
        detail::op_refused("fused attention takes sequences of at most 65535 * 64 tokens", __FILE__, __LINE__);
    return dim3(static_cast<unsigned>(heads_in_batch), blocks_for(time, kTile));
}

// The tile loads read 16 bytes at a time.
void check_aligned(const void* p) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
        detail::op_refused("fused attention needs qkv and d_y 16-byte aligned", __FILE__, __LINE__);
}

template <class Kernel> void allow_shared(Kernel kernel, std::size_t bytes) {
    LEVERS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
}

}  // namespace

bool attention_fused_supported(index_t channels, index_t heads) {
    return heads > 0 && channels % heads == 0 && channels / heads == kD;
}

void attention_fused_forward(bf16* y, float* lse, const bf16* qkv, index_t batch, index_t time, index_t channels,
                             index_t heads, cudaStream_t stream) {
    if (!attention_fused_supported(channels, heads))
        detail::op_refused("fused attention needs a head size (channels / heads) of 64", __FILE__, __LINE__);
    if (batch <= 0 || time <= 0) return;
    check_aligned(qkv);
    allow_shared(forward_kernel, kForwardShared);
    const dim3 grid = tile_grid(batch * heads, time);
    LEVERS_LAUNCH(forward_kernel<<<grid, kThreads, kForwardShared, stream>>>(
        y, lse, qkv, time, channels, heads, 1.0f / std::sqrt(static_cast<float>(kD))));
}

void attention_fused_backward(bf16* d_qkv, const bf16* d_y, const bf16* y, const float* lse, const bf16* qkv,
                              index_t batch, index_t time, index_t channels, index_t heads, cudaStream_t stream) {
    if (!attention_fused_supported(channels, heads))
        detail::op_refused("fused attention needs a head size (channels / heads) of 64", __FILE__, __LINE__);
    if (batch <= 0 || time <= 0) return;
    check_aligned(qkv);
    check_aligned(d_y);
    const index_t rows = batch * heads * time;
    Scratch<float> dot(static_cast<std::size_t>(rows));
    LEVERS_LAUNCH(row_dot_kernel<<<blocks_for(rows, kWarps), kThreads, 0, stream>>>(dot.get(), d_y, y, rows, time,
                                                                                    channels, heads));
    const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
    const dim3 grid = tile_grid(batch * heads, time);
    allow_shared(backward_kv_kernel, kBackwardShared);
    allow_shared(backward_q_kernel, kBackwardShared);
    LEVERS_LAUNCH(backward_kv_kernel<<<grid, kThreads, kBackwardShared, stream>>>(d_qkv, d_y, lse, dot.get(), qkv,
                                                                                  time, channels, heads, scale));
    LEVERS_LAUNCH(backward_q_kernel<<<grid, kThreads, kBackwardShared, stream>>>(d_qkv, d_y, lse, dot.get(), qkv,
                                                                                 time, channels, heads, scale));
}

namespace {
void flash_call(const FlashAttentionCall& c) {
    const auto& q = c.qkv.shape;
    attention_fused_forward(ptr<bf16>(c.y), ptr<float>(c.lse), ptr<const bf16>(c.qkv), q[0], q[1], q[2] / 3, c.heads,
                            stream_of(c));
}
void flash_grad_call(const FlashAttentionBackwardCall& c) {
    const auto& q = c.qkv.shape;
    attention_fused_backward(ptr<bf16>(c.d_qkv), ptr<const bf16>(c.d_y), ptr<const bf16>(c.y),
                             ptr<const float>(c.lse), ptr<const bf16>(c.qkv), q[0], q[1], q[2] / 3, c.heads,
                             stream_of(c));
}
LEVERS_KERNEL(FlashAttentionCall, cuda, bf16, flash_call);
LEVERS_KERNEL(FlashAttentionBackwardCall, cuda, bf16, flash_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda

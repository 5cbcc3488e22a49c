// Causal attention without the [time, time] matrices (flash-style), for the
// GPT's packed qkv (levers/kernels/flash_attention.hpp) and the Llama family's
// grouped-query heads (levers/kernels/causal_attention.hpp) alike: both are rows of
// q, k and v lying `row` elements apart, which is all these kernels read. A
// block holds a tile of 64 queries (or keys) in shared memory, walks the key
// (or query) tiles its rows can see, and multiplies 16x16 bf16 fragments on
// the tensor cores (WMMA) with f32 accumulators. Forward keeps a running max
// and sum per query row (online softmax) and saves the row's log-sum-exp;
// backward recomputes the probabilities from it, dK and dV in one kernel per
// key tile (a key-value head's whole group of query heads in one block) and
// dQ in another per query tile, so every sum has a fixed order (no atomics).
// A query sees the keys from its lowest (its document's start, its window)
// to its own position; tiles wholly outside that are never visited. Head
// sizes 64 and 128, bf16 storage.
#include "levers/kernels/causal_attention.hpp"
#include "levers/kernels/flash_attention.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"

#include <mma.h>

#include <cmath>
#include <cstdint>

namespace levers::kernels::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;      // queries or keys per tile
constexpr int kWarps = 4;      // each owns 16 rows of the block's tile
constexpr int kThreads = 32 * kWarps;
constexpr int kLdP = kTile + 8;  // bf16 probability rows
constexpr index_t kNever = INT64_MAX;  // the lowest key of a row past the end: it sees none

// Row widths for head size D: bf16 tile rows padded against bank conflicts
// (a multiple of 8), f32 rows wide enough for a warp's scores (64 keys) or
// its output rows (D channels), a multiple of 4.
template <int D> struct Dims {
    static_assert(D % 16 == 0);
    static constexpr int kLdH = D + 8;
    static constexpr int kLdF = (D > kTile ? D : kTile) + 4;
    static constexpr int kFrags = D / 16;
};

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
template <int D> constexpr std::size_t kTileBytes = piece(kTile * Dims<D>::kLdH * sizeof(bf16));
template <int D> constexpr std::size_t kBlockBytes = piece(kWarps * 16 * Dims<D>::kLdF * sizeof(float));
constexpr std::size_t kProbBytes = piece(kWarps * 16 * kLdP * sizeof(bf16));
constexpr std::size_t kRowBytes = piece(kTile * sizeof(float));
constexpr std::size_t kLowestBytes = piece(kTile * sizeof(index_t));
template <int D>
constexpr std::size_t kForwardShared = 3 * kTileBytes<D> + 2 * kBlockBytes<D> + kProbBytes + 2 * kRowBytes + kLowestBytes;
template <int D>
constexpr std::size_t kBackwardShared = 4 * kTileBytes<D> + 2 * kBlockBytes<D> + kProbBytes + 2 * kRowBytes + kLowestBytes;

// Where q, k and v are: head 0 of position 0 of batch row 0 (the problem says how far apart the rest lie).
struct Inputs {
    const bf16 *q, *k, *v;
};

// Rows [row0, row0 + 64) of one head's D channels into a tile, zeros
// outside [0, limit): `head` is row 0's first channel, rows `stride` apart.
// 16 bytes (8 channels) per load; the launchers check the alignment.
template <int D> __device__ void load_rows(bf16* tile, const bf16* head, index_t stride, index_t row0, index_t limit) {
    constexpr int kVec = 8, kPerRow = D / kVec;
    for (int i = threadIdx.x; i < kTile * kPerRow; i += kThreads) {
        const int r = i / kPerRow, c = i % kPerRow * kVec;
        const index_t t = row0 + r;
        uint4 value = make_uint4(0, 0, 0, 0);  // bf16 zeros
        if (t >= 0 && t < limit) value = *reinterpret_cast<const uint4*>(head + t * stride + c);
        *reinterpret_cast<uint4*>(tile + r * Dims<D>::kLdH + c) = value;
    }
}

// The first key each query row of a tile sees (kNever past the end).
__device__ void load_lowest(index_t* lowest, const CausalProblem& p, index_t b, index_t q0) {
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
        const index_t t = q0 + i;
        lowest[i] = t < p.time ? p.lowest(b, t) : kNever;
    }
}

// Whether query t, whose first key is `low`, sees `key`.
__device__ bool sees(const CausalProblem& p, index_t low, index_t t, index_t key) {
    return key >= low && key <= p.position(t);
}

// out[16 x 64] (f32, ld kLdF) = a[16 x D] · bᵀ where b is [64 x D] row-major
// (ld kLdH): the warp's rows against every row of the other tile.
template <int D> __device__ void rows_times_rows(float* out, const bf16* a, const bf16* b) {
    using Dm = Dims<D>;
    FragA fa[Dm::kFrags];  // the warp's rows, loaded once for the four column blocks
    for (int k = 0; k < Dm::kFrags; ++k) wmma::load_matrix_sync(fa[k], a + k * 16, Dm::kLdH);
    for (int n = 0; n < kTile / 16; ++n) {
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < Dm::kFrags; ++k) {
            FragBCol fb;
            wmma::load_matrix_sync(fb, b + n * 16 * Dm::kLdH + k * 16, Dm::kLdH);
            wmma::mma_sync(acc, fa[k], fb, acc);
        }
        wmma::store_matrix_sync(out + n * 16, acc, Dm::kLdF, wmma::mem_row_major);
    }
}

// acc[n] += p[16 x 64] (bf16, ld kLdP) · b[64 x D] row-major (ld kLdH), n over the D/16 column blocks.
template <int D> __device__ void accumulate(FragC (&acc)[Dims<D>::kFrags], const bf16* p, const bf16* b) {
    using Dm = Dims<D>;
    for (int k = 0; k < kTile / 16; ++k) {
        FragA fa;
        wmma::load_matrix_sync(fa, p + k * 16, kLdP);
        for (int n = 0; n < Dm::kFrags; ++n) {
            FragBRow fb;
            wmma::load_matrix_sync(fb, b + k * 16 * Dm::kLdH + n * 16, Dm::kLdH);
            wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
}

// Writes a warp's 16 x D accumulators, times `scale`, into rows row0.. of
// one head (`head`: row 0's first channel, rows `stride` apart; rows at or
// past `limit` are dropped), through the warp's f32 scratch.
template <int D>
__device__ void write_rows(bf16* head, index_t stride, FragC (&acc)[Dims<D>::kFrags], float* scratch, float scale,
                           index_t row0, index_t limit) {
    using Dm = Dims<D>;
    for (int n = 0; n < Dm::kFrags; ++n)
        wmma::store_matrix_sync(scratch + n * 16, acc[n], Dm::kLdF, wmma::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x % 32;
    for (int r = 0; r < 16; ++r) {
        const index_t t = row0 + r;
        if (t >= limit) break;
        for (int c = lane; c < D; c += 32) head[t * stride + c] = __float2bfloat16_rn(scratch[r * Dm::kLdF + c] * scale);
    }
}

// One key tile's step of the online softmax for a warp's 16 query rows
// (first query `t0`, their first keys `lowest`): from the scores `s`, the
// probabilities `p` against the rows' running max, the output rows `o`
// rescaled to it, the max and sum updated. Two lanes per row, each over half
// the tile's keys (lane ^ 16 has the other half), so a row costs two
// shuffles rather than two warp-wide reductions; each lane starts its half
// at a staggered column, so the 32 lanes spread over the banks.
template <int D>
__device__ void online_softmax(const CausalProblem& p, const float* s, float* o, bf16* prob, float* row_max,
                               float* row_sum, const index_t* lowest, index_t t0, index_t k0, float scale) {
    constexpr int kLdF = Dims<D>::kLdF, kHalf = D / 2;
    const int lane = threadIdx.x % 32, r = lane % 16, half = lane / 16, start = r + 16 * half;
    const index_t t = t0 + r, low = lowest[r];
    auto column = [&](int i) { return half * 32 + (i + start) % 32; };
    float x[32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int j = column(i);
        x[i] = sees(p, low, t, k0 + j) ? s[r * kLdF + j] * scale : -INFINITY;
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
        prob[r * kLdP + column(i)] = __float2bfloat16_rn(e);
    }
    sum += __shfl_xor_sync(kFullWarp, sum, 16);
    const float rescale = __expf(old_max - base);
    for (int i = 0; i < kHalf; ++i) o[r * kLdF + half * kHalf + (i + start) % kHalf] *= rescale;  // the D columns, split alike
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

// The first key tile any row of the query tile at q0 sees (the rows' lowest keys never decrease).
__device__ index_t first_key_tile(const CausalProblem& p, index_t b, index_t q0) {
    return p.lowest(b, q0) / kTile * kTile;
}
// The last key any row of the query tile at q0 sees.
__device__ index_t last_key(const CausalProblem& p, index_t q0) {
    return p.position((q0 + kTile < p.time ? q0 + kTile : p.time) - 1);
}

// One block per (batch row, query head) and query tile: y and lse of its rows.
template <int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(bf16* y, float* lse, Inputs in, CausalProblem p, float scale) {
    using Dm = Dims<D>;
    extern __shared__ __align__(128) char shared[];
    Carve carve{shared};
    bf16 *q = carve.take<bf16>(kTile * Dm::kLdH), *k = carve.take<bf16>(kTile * Dm::kLdH),
         *v = carve.take<bf16>(kTile * Dm::kLdH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* s = carve.take<float>(kWarps * 16 * Dm::kLdF) + warp * 16 * Dm::kLdF;
    float* o = carve.take<float>(kWarps * 16 * Dm::kLdF) + warp * 16 * Dm::kLdF;  // the output rows, rescaled as max moves
    bf16* prob = carve.take<bf16>(kWarps * 16 * kLdP) + warp * 16 * kLdP;
    float *row_max = carve.take<float>(kTile), *row_sum = carve.take<float>(kTile);
    index_t* lowest = carve.take<index_t>(kTile);
    const index_t b = blockIdx.x / p.heads, h = blockIdx.x % p.heads, kvh = h / p.group();
    const index_t q0 = heavy_first(blockIdx.y) * kTile;

    load_rows<D>(q, in.q + b * p.q_batch + h * D, p.q_row, q0, p.time);
    load_lowest(lowest, p, b, q0);
    for (int i = lane; i < 16 * Dm::kLdF; i += 32) o[i] = 0;
    if (lane < 16) {
        row_max[warp * 16 + lane] = -INFINITY;
        row_sum[warp * 16 + lane] = 0;
    }
    const bf16* k_head = in.k + b * p.k_batch + kvh * D;
    const bf16* v_head = in.v + b * p.v_batch + kvh * D;
    const index_t last = last_key(p, q0);
    for (index_t k0 = first_key_tile(p, b, q0); k0 <= last; k0 += kTile) {
        __syncthreads();  // every warp is done with the previous K and V (and the first time: lowest is written)
        load_rows<D>(k, k_head, p.k_row, k0, p.keys);
        load_rows<D>(v, v_head, p.v_row, k0, p.keys);
        __syncthreads();
        rows_times_rows<D>(s, q + warp * 16 * Dm::kLdH, k);
        __syncwarp();
        online_softmax<D>(p, s, o, prob, row_max + warp * 16, row_sum + warp * 16, lowest + warp * 16,
                          q0 + warp * 16, k0, scale);
        __syncwarp();
        FragC acc[Dm::kFrags];
        for (int n = 0; n < Dm::kFrags; ++n)
            wmma::load_matrix_sync(acc[n], o + n * 16, Dm::kLdF, wmma::mem_row_major);
        accumulate<D>(acc, prob, v);
        for (int n = 0; n < Dm::kFrags; ++n)
            wmma::store_matrix_sync(o + n * 16, acc[n], Dm::kLdF, wmma::mem_row_major);
        __syncwarp();
    }
    for (int r = 0; r < 16; ++r) {
        const index_t t = q0 + warp * 16 + r;
        if (t >= p.time) break;
        const float m = row_max[warp * 16 + r], l = row_sum[warp * 16 + r];
        for (int c = lane; c < D; c += 32)
            y[((b * p.time + t) * p.heads + h) * D + c] = __float2bfloat16_rn(o[r * Dm::kLdF + c] / l);
        if (lane == 0) lse[blockIdx.x * p.time + t] = m + logf(l);
    }
}

// dot[(b·H + h)·T + t] = Σ_c d_y · y over the head's channels: the softmax
// backward's row term, one warp per row of y [B, T, H, D].
template <int D>
__global__ void row_dot_kernel(float* dot, const bf16* d_y, const bf16* y, index_t rows, index_t time, index_t heads) {
    const index_t row = blockIdx.x * static_cast<index_t>(kWarps) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const index_t bh = row / time, t = row % time, b = bh / heads, h = bh % heads;
    const index_t at = ((b * time + t) * heads + h) * D;
    float sum = 0;
    for (int c = lane; c < D; c += 32) sum += load(d_y[at + c]) * load(y[at + c]);
    sum = warp_sum(sum);
    if (lane == 0) dot[row] = sum;
}

// Loads the per-row log-sum-exp, dot and first key of a query tile of head
// bh = b·H + h; rows past the end see no key.
__device__ void load_row_terms(float* tile_lse, float* tile_dot, index_t* lowest, const float* lse, const float* dot,
                               const CausalProblem& p, index_t b, index_t bh, index_t q0) {
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
        const index_t t = q0 + i;
        tile_lse[i] = t < p.time ? lse[bh * p.time + t] : INFINITY;
        tile_dot[i] = t < p.time ? dot[bh * p.time + t] : 0.0f;
        lowest[i] = t < p.time ? p.lowest(b, t) : kNever;
    }
}

// The backward kernels' shared memory: the key tile's K and V, the query
// tile's Q and dO, this warp's two f32 blocks (scores or probabilities, and
// dP) and bf16 operand block, and the query rows' log-sum-exp, dot and first key.
template <int D> struct BackwardShared {
    bf16 *k, *v, *q, *dout;
    float *scores, *dp;
    bf16* operand;
    float *lse, *dot;
    index_t* lowest;
    __device__ explicit BackwardShared(char* shared) {
        using Dm = Dims<D>;
        Carve carve{shared};
        k = carve.take<bf16>(kTile * Dm::kLdH);
        v = carve.take<bf16>(kTile * Dm::kLdH);
        q = carve.take<bf16>(kTile * Dm::kLdH);
        dout = carve.take<bf16>(kTile * Dm::kLdH);
        const int warp = threadIdx.x / 32;
        scores = carve.take<float>(kWarps * 16 * Dm::kLdF) + warp * 16 * Dm::kLdF;
        dp = carve.take<float>(kWarps * 16 * Dm::kLdF) + warp * 16 * Dm::kLdF;
        operand = carve.take<bf16>(kWarps * 16 * kLdP) + warp * 16 * kLdP;
        lse = carve.take<float>(kTile);
        dot = carve.take<float>(kTile);
        lowest = carve.take<index_t>(kTile);
    }
};

// Where the gradients go: dQ like q, dK and dV like k and v, rows `row` apart.
struct Grads {
    bf16 *dq, *dk, *dv;
    index_t dq_batch, dq_row, dkv_batch, dkv_row;
};

// One block per (batch row, key-value head) and key tile: dV = Σ Pᵀ dO and
// dK = scale · Σ dSᵀ Q over the group's query heads and the query tiles that see the keys.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_kv_kernel(Grads g, const bf16* d_y, const float* lse, const float* dot, Inputs in, CausalProblem p,
                       float scale) {
    using Dm = Dims<D>;
    extern __shared__ __align__(128) char shared[];
    const BackwardShared<D> m(shared);
    bf16 *k = m.k, *v = m.v, *q = m.q, *dout = m.dout, *operand = m.operand;  // operand: Pᵀ, then dSᵀ
    float *pt = m.scores, *dpt = m.dp, *tile_lse = m.lse, *tile_dot = m.dot;   // Pᵀ: this warp's keys x queries
    index_t* lowest = m.lowest;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // Key tile 0 meets the most query tiles: the heaviest blocks already come first.
    const index_t b = blockIdx.x / p.kv_heads, kvh = blockIdx.x % p.kv_heads, k0 = static_cast<index_t>(blockIdx.y) * kTile;

    load_rows<D>(k, in.k + b * p.k_batch + kvh * D, p.k_row, k0, p.keys);
    load_rows<D>(v, in.v + b * p.v_batch + kvh * D, p.v_row, k0, p.keys);
    FragC dk[Dm::kFrags], dv[Dm::kFrags];
    for (int n = 0; n < Dm::kFrags; ++n) {
        wmma::fill_fragment(dk[n], 0.0f);
        wmma::fill_fragment(dv[n], 0.0f);
    }
    // The first query at or after key k0.
    const index_t first_query = k0 - (p.keys - p.time) > 0 ? k0 - (p.keys - p.time) : 0;
    for (index_t h = kvh * p.group(); h < (kvh + 1) * p.group(); ++h) {
        const index_t bh = b * p.heads + h;
        for (index_t q0 = first_query / kTile * kTile; q0 < p.time; q0 += kTile) {
            if (p.lowest(b, q0) > k0 + kTile - 1) break;  // this tile's first query, and all after, start past these keys
            __syncthreads();
            load_rows<D>(q, in.q + b * p.q_batch + h * D, p.q_row, q0, p.time);
            load_rows<D>(dout, d_y + b * p.time * p.heads * D + h * D, p.heads * D, q0, p.time);
            load_row_terms(tile_lse, tile_dot, lowest, lse, dot, p, b, bh, q0);
            __syncthreads();
            rows_times_rows<D>(pt, k + warp * 16 * Dm::kLdH, q);      // Sᵀ = K Qᵀ
            rows_times_rows<D>(dpt, v + warp * 16 * Dm::kLdH, dout);  // dPᵀ = V dOᵀ
            __syncwarp();
            for (int r = 0; r < 16; ++r) {
                const index_t key = k0 + warp * 16 + r;
                for (int j = lane; j < kTile; j += 32) {
                    const float prob = sees(p, lowest[j], q0 + j, key) && key < p.keys
                                           ? __expf(pt[r * Dm::kLdF + j] * scale - tile_lse[j])
                                           : 0.0f;
                    pt[r * Dm::kLdF + j] = prob;
                    operand[r * kLdP + j] = __float2bfloat16_rn(prob);
                }
            }
            __syncwarp();
            accumulate<D>(dv, operand, dout);  // dV += Pᵀ dO
            __syncwarp();
            for (int r = 0; r < 16; ++r)
                for (int j = lane; j < kTile; j += 32)
                    operand[r * kLdP + j] =
                        __float2bfloat16_rn(pt[r * Dm::kLdF + j] * (dpt[r * Dm::kLdF + j] - tile_dot[j]));
            __syncwarp();
            accumulate<D>(dk, operand, q);  // dK += dSᵀ Q (scaled when written)
        }
    }
    __syncwarp();
    const index_t row0 = k0 + warp * 16;
    write_rows<D>(g.dk + b * g.dkv_batch + kvh * D, g.dkv_row, dk, pt, scale, row0, p.keys);
    __syncwarp();
    write_rows<D>(g.dv + b * g.dkv_batch + kvh * D, g.dkv_row, dv, pt, 1.0f, row0, p.keys);
}

// One block per (batch row, query head) and query tile: dQ = scale · Σ dS K over the key tiles it sees.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_q_kernel(Grads g, const bf16* d_y, const float* lse, const float* dot, Inputs in, CausalProblem p,
                      float scale) {
    using Dm = Dims<D>;
    extern __shared__ __align__(128) char shared[];
    const BackwardShared<D> m(shared);
    bf16 *q = m.q, *dout = m.dout, *k = m.k, *v = m.v, *ds = m.operand;
    float *s = m.scores, *dp = m.dp, *tile_lse = m.lse, *tile_dot = m.dot;
    index_t* lowest = m.lowest;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const index_t bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads, kvh = h / p.group();
    const index_t q0 = heavy_first(blockIdx.y) * kTile;

    load_rows<D>(q, in.q + b * p.q_batch + h * D, p.q_row, q0, p.time);
    load_rows<D>(dout, d_y + b * p.time * p.heads * D + h * D, p.heads * D, q0, p.time);
    load_row_terms(tile_lse, tile_dot, lowest, lse, dot, p, b, bh, q0);
    FragC dq[Dm::kFrags];
    for (int n = 0; n < Dm::kFrags; ++n) wmma::fill_fragment(dq[n], 0.0f);
    const bf16* k_head = in.k + b * p.k_batch + kvh * D;
    const bf16* v_head = in.v + b * p.v_batch + kvh * D;
    const index_t last = last_key(p, q0);
    for (index_t k0 = first_key_tile(p, b, q0); k0 <= last; k0 += kTile) {
        __syncthreads();
        load_rows<D>(k, k_head, p.k_row, k0, p.keys);
        load_rows<D>(v, v_head, p.v_row, k0, p.keys);
        __syncthreads();
        rows_times_rows<D>(s, q + warp * 16 * Dm::kLdH, k);      // S = Q Kᵀ
        rows_times_rows<D>(dp, dout + warp * 16 * Dm::kLdH, v);  // dP = dO Vᵀ
        __syncwarp();
        for (int r = 0; r < 16; ++r) {
            const int row = warp * 16 + r;
            const index_t t = q0 + row;
            for (int j = lane; j < kTile; j += 32) {
                const float prob = sees(p, lowest[row], t, k0 + j)
                                       ? __expf(s[r * Dm::kLdF + j] * scale - tile_lse[row])
                                       : 0.0f;
                ds[r * kLdP + j] = __float2bfloat16_rn(prob * (dp[r * Dm::kLdF + j] - tile_dot[row]));
            }
        }
        __syncwarp();
        accumulate<D>(dq, ds, k);  // dQ += dS K
    }
    __syncwarp();
    write_rows<D>(g.dq + b * g.dq_batch + h * D, g.dq_row, dq, s, scale, q0 + warp * 16, p.time);
}

// (heads in the batch, tile): on x, whose limit is 2^31 - 1, rather than on
// y (65535), which then caps the sequence at 4M tokens instead.
dim3 tile_grid(index_t heads_in_batch, index_t rows) {
    if (blocks_for(rows, kTile) > 65535)
        detail::op_refused("fused attention takes sequences of at most 65535 * 64 tokens", __FILE__, __LINE__);
    return dim3(static_cast<unsigned>(heads_in_batch), blocks_for(rows, kTile));
}

// The tile loads read 16 bytes at a time: every row of every head must start on a 16-byte boundary.
void check_aligned(const void* p, index_t batch_stride, index_t row_stride, const char* what) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0 || batch_stride % 8 != 0 || row_stride % 8 != 0)
        detail::op_refused(what, __FILE__, __LINE__);
}
void check_inputs(const Inputs& in, const CausalProblem& p, const char* what) {
    check_aligned(in.q, p.q_batch, p.q_row, what);
    check_aligned(in.k, p.k_batch, p.k_row, what);
    check_aligned(in.v, p.v_batch, p.v_row, what);
}

template <class Kernel> void allow_shared(Kernel kernel, std::size_t bytes) {
    LEVERS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
}

constexpr const char* kHeadSizes = "fused attention needs a head size of 64 or 128";

template <int D> void forward(bf16* y, float* lse, const Inputs& in, const CausalProblem& p, cudaStream_t stream) {
    allow_shared(forward_kernel<D>, kForwardShared<D>);
    LEVERS_LAUNCH(forward_kernel<D><<<tile_grid(p.batch * p.heads, p.time), kThreads, kForwardShared<D>, stream>>>(
        y, lse, in, p, 1.0f / std::sqrt(static_cast<float>(D))));
}

template <int D>
void backward(const Grads& g, const bf16* d_y, const bf16* y, const float* lse, const Inputs& in,
              const CausalProblem& p, cudaStream_t stream) {
    const index_t rows = p.batch * p.heads * p.time;
    Scratch<float> dot(static_cast<std::size_t>(rows));
    LEVERS_LAUNCH(row_dot_kernel<D><<<blocks_for(rows, kWarps), kThreads, 0, stream>>>(dot.get(), d_y, y, rows, p.time,
                                                                                         p.heads));
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    allow_shared(backward_kv_kernel<D>, kBackwardShared<D>);
    allow_shared(backward_q_kernel<D>, kBackwardShared<D>);
    LEVERS_LAUNCH(backward_kv_kernel<D><<<tile_grid(p.batch * p.kv_heads, p.keys), kThreads, kBackwardShared<D>,
                                          stream>>>(g, d_y, lse, dot.get(), in, p, scale));
    LEVERS_LAUNCH(backward_q_kernel<D><<<tile_grid(p.batch * p.heads, p.time), kThreads, kBackwardShared<D>,
                                         stream>>>(g, d_y, lse, dot.get(), in, p, scale));
}

// GPT-2's packed qkv [B, T, 3C] as a problem: q, k and v are its three thirds, rows 3C apart.
CausalProblem packed_problem(index_t batch, index_t time, index_t channels, index_t heads) {
    CausalProblem p;
    p.batch = batch;
    p.time = p.keys = time;
    p.heads = p.kv_heads = heads;
    p.head_dim = channels / heads;
    p.q_batch = p.k_batch = p.v_batch = time * 3 * channels;
    p.q_row = p.k_row = p.v_row = 3 * channels;
    return p;
}

}  // namespace

bool attention_fused_supported(index_t channels, index_t heads) {
    return heads > 0 && channels % heads == 0 && causal_attention_supported(channels / heads);
}

bool causal_attention_supported(index_t head_dim) { return head_dim == 64 || head_dim == 128; }

void causal_attention_forward(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v,
                              const CausalProblem& p, cudaStream_t stream) {
    if (!causal_attention_supported(p.head_dim)) detail::op_refused(kHeadSizes, __FILE__, __LINE__);
    if (p.batch <= 0 || p.time <= 0) return;
    const Inputs in{q, k, v};
    check_inputs(in, p, "fused attention needs every row of q, k and v 16-byte aligned");
    if (p.head_dim == 64) forward<64>(y, lse, in, p, stream);
    else forward<128>(y, lse, in, p, stream);
}

void causal_attention_backward(bf16* d_q, bf16* d_k, bf16* d_v, const bf16* d_y, const bf16* y, const float* lse,
                               const bf16* q, const bf16* k, const bf16* v, const CausalProblem& p,
                               cudaStream_t stream) {
    if (!causal_attention_supported(p.head_dim)) detail::op_refused(kHeadSizes, __FILE__, __LINE__);
    if (p.batch <= 0 || p.time <= 0) return;
    const Inputs in{q, k, v};
    check_inputs(in, p, "fused attention needs every row of q, k and v 16-byte aligned");
    check_aligned(d_y, 0, p.heads * p.head_dim, "fused attention needs d_y 16-byte aligned");
    // The gradients are contiguous: dQ like y, dK and dV [B, S, KVH, D].
    const Grads g{d_q, d_k, d_v, p.time * p.heads * p.head_dim, p.heads * p.head_dim,
                  p.keys * p.kv_heads * p.head_dim, p.kv_heads * p.head_dim};
    if (p.head_dim == 64) backward<64>(g, d_y, y, lse, in, p, stream);
    else backward<128>(g, d_y, y, lse, in, p, stream);
}

void attention_fused_forward(bf16* y, float* lse, const bf16* qkv, index_t batch, index_t time, index_t channels,
                             index_t heads, cudaStream_t stream) {
    if (!attention_fused_supported(channels, heads))
        detail::op_refused("fused attention needs a head size (channels / heads) of 64 or 128", __FILE__, __LINE__);
    if (batch <= 0 || time <= 0) return;
    const CausalProblem p = packed_problem(batch, time, channels, heads);
    const Inputs in{qkv, qkv + channels, qkv + 2 * channels};
    check_inputs(in, p, "fused attention needs qkv and d_y 16-byte aligned");
    if (p.head_dim == 64) forward<64>(y, lse, in, p, stream);
    else forward<128>(y, lse, in, p, stream);
}

void attention_fused_backward(bf16* d_qkv, const bf16* d_y, const bf16* y, const float* lse, const bf16* qkv,
                              index_t batch, index_t time, index_t channels, index_t heads, cudaStream_t stream) {
    if (!attention_fused_supported(channels, heads))
        detail::op_refused("fused attention needs a head size (channels / heads) of 64 or 128", __FILE__, __LINE__);
    if (batch <= 0 || time <= 0) return;
    const CausalProblem p = packed_problem(batch, time, channels, heads);
    const Inputs in{qkv, qkv + channels, qkv + 2 * channels};
    check_inputs(in, p, "fused attention needs qkv and d_y 16-byte aligned");
    check_aligned(d_y, 0, channels, "fused attention needs qkv and d_y 16-byte aligned");
    // d_qkv is laid out as qkv: dQ, dK and dV are its thirds.
    const index_t batch_stride = time * 3 * channels, row = 3 * channels;
    const Grads g{d_qkv, d_qkv + channels, d_qkv + 2 * channels, batch_stride, row, batch_stride, row};
    if (p.head_dim == 64) backward<64>(g, d_y, y, lse, in, p, stream);
    else backward<128>(g, d_y, y, lse, in, p, stream);
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
void causal_call(const CausalAttentionCall& c) {
    causal_attention_forward(ptr<bf16>(c.y), ptr<float>(c.lse), ptr<const bf16>(c.q), ptr<const bf16>(c.k),
                             ptr<const bf16>(c.v), causal_problem(c.q, c.k, c.v, c.starts, c.window), stream_of(c));
}
void causal_grad_call(const CausalAttentionBackwardCall& c) {
    causal_attention_backward(ptr<bf16>(c.d_q), ptr<bf16>(c.d_k), ptr<bf16>(c.d_v), ptr<const bf16>(c.d_y),
                              ptr<const bf16>(c.y), ptr<const float>(c.lse), ptr<const bf16>(c.q),
                              ptr<const bf16>(c.k), ptr<const bf16>(c.v),
                              causal_problem(c.q, c.k, c.v, c.starts, c.window), stream_of(c));
}
LEVERS_KERNEL(FlashAttentionCall, cuda, bf16, flash_call);
LEVERS_KERNEL(FlashAttentionBackwardCall, cuda, bf16, flash_grad_call);
LEVERS_KERNEL(CausalAttentionCall, cuda, bf16, causal_call);
LEVERS_KERNEL(CausalAttentionBackwardCall, cuda, bf16, causal_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda

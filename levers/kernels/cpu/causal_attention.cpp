// Causal grouped-query attention on the CPU, a tile of query rows at a time:
// the tile's scores against the keys it can see (from its first row's lowest
// key to its last row's position) in one product, softmax row by row, then
// the tile's outputs in another; nothing bigger than one tile's scores is
// made, and backward makes them again from the saved log-sum-exp. Packed
// documents and windows skip the keys before a tile's first reachable key.
#include "levers/kernels/causal_attention.hpp"

#include "levers/kernels/cpu/eigen_maps.hpp"
#include "levers/kernels/cpu/thread_scratch.hpp"

#include <algorithm>
#include <cmath>

namespace levers::kernels::cpu {

namespace {

constexpr index_t kRows = 64;  // queries per tile

// One tile: query rows [r0, r0 + rows) of head h and the keys [lo, lo + n) they reach.
struct Tile {
    index_t r0, rows, lo, n;
};
Tile tile(const CausalProblem& p, index_t b, index_t r0) {
    const index_t rows = std::min(kRows, p.time - r0);
    const index_t lo = p.lowest(b, r0);  // starts never decrease, windows move forward: the tile's smallest
    return {r0, rows, lo, p.position(r0 + rows - 1) - lo + 1};
}
// The most elements a tile's scores take.
std::size_t tile_capacity(const CausalProblem& p) { return static_cast<std::size_t>(std::min(kRows, p.time) * p.keys); }

// The rows of q, k and v a tile reads.
template <class T> struct Operands {
    ConstStridedMap<T> q, k, v;
};
template <class T>
Operands<T> operands(const CausalProblem& p, const T* q, const T* k, const T* v, index_t b, index_t h, const Tile& t) {
    const index_t d = p.head_dim, kvh = h / p.group();
    return {ConstStridedMap<T>(q + b * p.q_batch + t.r0 * p.q_row + h * d, t.rows, d, Eigen::OuterStride<>(p.q_row)),
            ConstStridedMap<T>(k + b * p.k_batch + t.lo * p.k_row + kvh * d, t.n, d, Eigen::OuterStride<>(p.k_row)),
            ConstStridedMap<T>(v + b * p.v_batch + t.lo * p.v_row + kvh * d, t.n, d, Eigen::OuterStride<>(p.v_row))};
}

// The columns of tile row i that query r0 + i sees: [first, first + count).
struct Seen {
    index_t first, count;
};
Seen seen(const CausalProblem& p, index_t b, const Tile& t, index_t i) {
    const index_t first = p.lowest(b, t.r0 + i) - t.lo;
    return {first, p.position(t.r0 + i) - t.lo - first + 1};
}

// Softmax of scores row i (scaled) over the keys it sees, zero elsewhere; returns its log-sum-exp. Inlined as
// the loop it came from was (out of line, GCC 12 warns falsely inside Eigen's AVX-512 exp).
template <class T> [[gnu::always_inline]] inline T softmax_row(MatMap<T>& s, index_t i, const Seen& c, T scale) {
    auto row = s.row(i);
    auto reached = row.segment(c.first, c.count).array();
    const T top = reached.maxCoeff() * scale;
    reached = (reached * scale - top).exp();
    const T sum = reached.sum();
    reached /= sum;
    row.head(c.first).setZero();
    row.tail(s.cols() - c.first - c.count).setZero();
    return top + std::log(sum);
}

// One query per row (a decoding step): the heads sharing a key-value head
// are the rows of one product, so its keys and values are read once for all
// of them, not once per head.
template <class T>
void decode_forward(T* y, T* lse, const T* q, const T* k, const T* v, const CausalProblem& p) {
    const index_t d = p.head_dim, group = p.group();
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    const ThreadScratch<T> scores(static_cast<std::size_t>(group * p.keys));
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (index_t b = 0; b < p.batch; ++b) {
        for (index_t kvh = 0; kvh < p.kv_heads; ++kvh) {
            const index_t h0 = kvh * group;
            const Tile t = tile(p, b, 0);
            const Operands<T> in = operands(p, q, k, v, b, h0, t);
            const ConstStridedMap<T> heads(q + b * p.q_batch + h0 * d, group, d, Eigen::OuterStride<>(d));
            MatMap<T> s(scores.mine(), group, t.n);
            s.noalias() = heads * in.k.transpose();
            const Seen c = seen(p, b, t, 0);
            for (index_t i = 0; i < group; ++i) lse[b * p.heads + h0 + i] = softmax_row(s, i, c, scale);
            MatMap<T>(y + (b * p.heads + h0) * d, group, d).noalias() = s * in.v;
        }
    }
}

// y [B, T, H, D] and lse [B, H, T], contiguous.
template <class T>
void forward(T* y, T* lse, const T* q, const T* k, const T* v, const CausalProblem& p) {
    if (p.time == 1 && p.group() > 1) return decode_forward(y, lse, q, k, v, p);
    const index_t d = p.head_dim;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    const ThreadScratch<T> scores(tile_capacity(p));
    // A (batch, head) pair per task; the products run single-threaded inside.
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (index_t b = 0; b < p.batch; ++b) {
        for (index_t h = 0; h < p.heads; ++h) {
            for (index_t r0 = 0; r0 < p.time; r0 += kRows) {
                const Tile t = tile(p, b, r0);
                const Operands<T> in = operands(p, q, k, v, b, h, t);
                MatMap<T> s(scores.mine(), t.rows, t.n);
                s.noalias() = in.q * in.k.transpose();
                for (index_t i = 0; i < t.rows; ++i)
                    lse[(b * p.heads + h) * p.time + r0 + i] = softmax_row(s, i, seen(p, b, t, i), scale);
                StridedMap<T>(y + ((b * p.time + r0) * p.heads + h) * d, t.rows, d,
                              Eigen::OuterStride<>(p.heads * d))
                    .noalias() = s * in.v;
            }
        }
    }
}

// d_q [B, T, H, D] and d_k, d_v [B, S, KVH, D], contiguous, written.
template <class T>
void backward(T* d_q, T* d_k, T* d_v, const T* d_y, const T* y, const T* lse, const T* q, const T* k, const T* v,
              const CausalProblem& p) {
    const index_t d = p.head_dim, row = p.heads * d, kv_row = p.kv_heads * d;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    const ThreadScratch<T> probs(tile_capacity(p)), d_scores(tile_capacity(p));
    // A (batch, key-value head) pair per task: it alone adds into that head's d_k and d_v.
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (index_t b = 0; b < p.batch; ++b) {
        for (index_t kvh = 0; kvh < p.kv_heads; ++kvh) {
            const auto keys = [&](T* base, index_t from, index_t n) {
                return StridedMap<T>(base + (b * p.keys + from) * kv_row + kvh * d, n, d,
                                     Eigen::OuterStride<>(kv_row));
            };
            keys(d_k, 0, p.keys).setZero();
            keys(d_v, 0, p.keys).setZero();
            for (index_t h = kvh * p.group(); h < (kvh + 1) * p.group(); ++h) {
                for (index_t r0 = 0; r0 < p.time; r0 += kRows) {
                    const Tile t = tile(p, b, r0);
                    const Operands<T> in = operands(p, q, k, v, b, h, t);
                    const auto rows = [&](const T* base) {
                        return ConstStridedMap<T>(base + ((b * p.time + r0) * p.heads + h) * d, t.rows, d,
                                                  Eigen::OuterStride<>(row));
                    };
                    const ConstStridedMap<T> dy = rows(d_y), out = rows(y);
                    MatMap<T> pr(probs.mine(), t.rows, t.n), ds(d_scores.mine(), t.rows, t.n);
                    pr.noalias() = in.q * in.k.transpose();
                    ds.noalias() = dy * in.v.transpose();  // d_p
                    for (index_t i = 0; i < t.rows; ++i) {
                        const Seen c = seen(p, b, t, i);
                        const T row_lse = lse[(b * p.heads + h) * p.time + r0 + i];
                        const T dot = dy.row(i).dot(out.row(i));  // Σ_j p_j d_p_j
                        auto reached = pr.row(i).segment(c.first, c.count).array();
                        reached = (reached * scale - row_lse).exp();
                        pr.row(i).head(c.first).setZero();
                        pr.row(i).tail(t.n - c.first - c.count).setZero();
                        ds.row(i).array() = pr.row(i).array() * (ds.row(i).array() - dot) * scale;
                    }
                    keys(d_v, t.lo, t.n).noalias() += pr.transpose() * dy;
                    StridedMap<T>(d_q + ((b * p.time + r0) * p.heads + h) * d, t.rows, d, Eigen::OuterStride<>(row))
                        .noalias() = ds * in.k;
                    keys(d_k, t.lo, t.n).noalias() += ds.transpose() * in.q;
                }
            }
        }
    }
}

template <class T> void forward_call(const CausalAttentionCall& c) {
    forward(c.y.as<T>(), c.lse.as<T>(), c.q.as<const T>(), c.k.as<const T>(), c.v.as<const T>(),
            causal_problem(c.q, c.k, c.v, c.starts, c.window));
}
template <class T> void backward_call(const CausalAttentionBackwardCall& c) {
    backward(c.d_q.as<T>(), c.d_k.as<T>(), c.d_v.as<T>(), c.d_y.as<const T>(), c.y.as<const T>(),
             c.lse.as<const T>(), c.q.as<const T>(), c.k.as<const T>(), c.v.as<const T>(),
             causal_problem(c.q, c.k, c.v, c.starts, c.window));
}
LEVERS_KERNEL(CausalAttentionCall, cpu, f32, forward_call<float>);
LEVERS_KERNEL(CausalAttentionCall, cpu, f64, forward_call<double>);
LEVERS_KERNEL(CausalAttentionBackwardCall, cpu, f32, backward_call<float>);
LEVERS_KERNEL(CausalAttentionBackwardCall, cpu, f64, backward_call<double>);

}  // namespace

}  // namespace levers::kernels::cpu

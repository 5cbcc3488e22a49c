#include "levers/distributed/shm_backend.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/futex.hpp"
#include "levers/distributed/shm_layout.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

namespace levers::dist {

namespace {

constexpr std::uint64_t kMagic = 0x315352455645'4c00ull;  // "LEVERS1"
constexpr std::uint32_t kVersion = 2;

// acc[0..n) += src[0..n); the restrict lets the compiler vectorise it.
template <class T> void add_into(T* __restrict acc, const T* __restrict src, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) acc[i] += src[i];
}

template <class T> void scale_by(T* __restrict x, T s, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

// About 20 microseconds of polling before sleeping on the futex.
constexpr int kSpins = 4000;

inline void pause_cpu() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

const char* op_name(std::uint32_t op) {
    static const char* names[] = {"?", "barrier", "all_reduce", "broadcast", "all_gather", "reduce_scatter"};
    return op < 6 ? names[op] : "?";
}

}  // namespace

std::size_t ShmBackend::segment_bytes(int world, std::size_t slot_bytes) {
    const std::size_t slot = (slot_bytes + kAlign - 1) / kAlign * kAlign;
    return (sizeof(Layout) + kAlign - 1) / kAlign * kAlign + static_cast<std::size_t>(world) * slot;
}

void ShmBackend::initialize(void* memory, std::size_t bytes, int world, std::size_t slot_bytes) {
    LEVERS_CHECK(world >= 1 && world <= kMaxRanks, "world size must be in [1, {}], got {}", kMaxRanks, world);
    LEVERS_CHECK(slot_bytes >= kAlign && slot_bytes % kAlign == 0, "slot size must be a positive multiple of {}, got {}",
                 kAlign, slot_bytes);
    LEVERS_CHECK(bytes >= segment_bytes(world, slot_bytes), "segment of {} bytes is smaller than the {} needed", bytes,
                 segment_bytes(world, slot_bytes));
    auto* l = new (memory) Layout{};
    l->version = kVersion;
    l->world = static_cast<std::uint32_t>(world);
    l->slot_bytes = slot_bytes;
    l->magic.store(kMagic, std::memory_order_release);
}

ShmBackend::ShmBackend(void* memory, std::size_t bytes, int rank, std::chrono::milliseconds timeout)
    : ShmBackend(memory, bytes, rank, timeout, Options{}) {}

ShmBackend::ShmBackend(void* memory, std::size_t bytes, int rank, std::chrono::milliseconds timeout, Options options)
    : layout_(static_cast<Layout*>(memory)),
      timeout_(timeout),
      watch_peers_(options.watch_peers),
      first_rank_(options.first_rank),
      store_(memory, timeout) {
    LEVERS_CHECK(bytes >= sizeof(Layout) && layout_->magic.load(std::memory_order_acquire) == kMagic &&
                     layout_->version == kVersion,
                 "shared-memory segment is not a levers process group (version {})", kVersion);
    world_ = static_cast<int>(layout_->world);
    slot_bytes_ = layout_->slot_bytes;
    LEVERS_CHECK(bytes >= segment_bytes(world_, slot_bytes_), "segment of {} bytes is too small for {} ranks", bytes,
                 world_);
    LEVERS_CHECK(rank >= 0 && rank < world_, "rank {} is outside the group's world of {}", rank, world_);
    LEVERS_CHECK(timeout.count() > 0, "collective timeout must be positive");
    rank_ = rank;
    slots_ = static_cast<std::byte*>(memory) + (sizeof(Layout) + kAlign - 1) / kAlign * kAlign;
    layout_->ranks[rank].pid.store(static_cast<std::int32_t>(getpid()));
    layout_->ranks[rank].heartbeat_ns.store(now_ns());
}

std::byte* ShmBackend::slot(int r) const { return slots_ + static_cast<std::size_t>(r) * slot_bytes_; }

namespace {
// aborted_by while the first aborter writes its reason: readers wait for the
// real value, so nobody reports an abort whose reason is not there yet.
constexpr std::uint32_t kWritingReason = 0xffffffffu;

void publish_abort(ShmBackend::Layout* layout, std::uint32_t by, const std::string& why) {
    std::uint32_t none = 0;
    if (layout->aborted_by.compare_exchange_strong(none, kWritingReason, std::memory_order_acq_rel)) {
        std::snprintf(layout->abort_reason, sizeof(layout->abort_reason), "%s", why.c_str());
        layout->aborted_by.store(by, std::memory_order_release);
    }
    futex_wake_all(&layout->generation);
}
}  // namespace

void ShmBackend::abort(const std::string& why) { publish_abort(layout_, static_cast<std::uint32_t>(rank_ + 1), why); }

void ShmBackend::abort_group(void* memory, const std::string& why) {
    publish_abort(static_cast<Layout*>(memory), kMaxRanks + 1, why);
}

ShmBackend::AbortState ShmBackend::abort_state(const void* memory) {
    const auto* layout = static_cast<const Layout*>(memory);
    AbortState s;
    std::uint32_t by = 0;
    while ((by = layout->aborted_by.load(std::memory_order_acquire)) == kWritingReason) pause_cpu();
    if (by == 0) return s;
    if (by <= kMaxRanks) s.by = static_cast<int>(by) - 1;
    s.reason.assign(layout->abort_reason, strnlen(layout->abort_reason, sizeof(layout->abort_reason)));
    const std::uint64_t stalled = layout->stalled.load(std::memory_order_acquire);
    for (int r = 0; r < kMaxRanks; ++r)
        if (stalled >> r & 1) s.stalled.push_back(r);
    return s;
}

void ShmBackend::fail_aborted() {
    std::uint32_t by = 0;
    while ((by = layout_->aborted_by.load(std::memory_order_acquire)) == kWritingReason) pause_cpu();
    const std::string who =
        by > kMaxRanks ? std::string("the launcher") : fmt::format("rank {}", static_cast<int>(by) - 1 + first_rank_);
    LEVERS_FAIL("rank {}: the process group was aborted by {}: {}", rank_ + first_rank_, who,
                std::string(layout_->abort_reason, strnlen(layout_->abort_reason, sizeof(layout_->abort_reason))));
}

namespace {
// Whether process `pid` has exited (gone, or a zombie nobody reaped yet).
bool exited(std::int32_t pid) {
    if (pid <= 0) return false;  // not joined yet
    if (::kill(pid, 0) != 0) return errno == ESRCH;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// Adds the seconds of its lifetime to `total`.
struct ScopedSeconds {
    double& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~ScopedSeconds() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
};
}  // namespace

void ShmBackend::wait_all(Op op) {
    ScopedSeconds timed{timing_.waiting};
    wait_all_untimed(op);
}

void ShmBackend::wait_all_untimed(Op op) {
    if (layout_->aborted_by.load(std::memory_order_acquire) != 0) fail_aborted();
    RankRecord& me = layout_->ranks[rank_];
    me.heartbeat_ns.store(now_ns(), std::memory_order_relaxed);
    const std::uint32_t gen = layout_->generation.load(std::memory_order_acquire);
    me.arrivals.fetch_add(1, std::memory_order_relaxed);
    if (layout_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(world_)) {
        layout_->arrived.store(0, std::memory_order_relaxed);
        layout_->generation.fetch_add(1, std::memory_order_acq_rel);
        futex_wake_all(&layout_->generation);
        return;
    }
    // Spin briefly first: a futex sleep and wake-up costs tens of microseconds,
    // more than a whole small collective should.
    for (int spin = 0; spin < kSpins; ++spin) {
        if (layout_->generation.load(std::memory_order_acquire) != gen) return;
        pause_cpu();
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (layout_->generation.load(std::memory_order_acquire) == gen) {
        if (layout_->aborted_by.load(std::memory_order_acquire) != 0) fail_aborted();
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::nanoseconds::zero()) {
            const std::uint64_t mine = me.arrivals.load();
            std::string late;
            std::uint64_t stalled = 0;
            for (int r = 0; r < world_; ++r) {
                const RankRecord& other = layout_->ranks[r];
                if (other.arrivals.load() >= mine) continue;
                stalled |= std::uint64_t{1} << r;
                const std::uint64_t seq = other.seq.load();
                late += fmt::format("{}rank {} ({})", late.empty() ? "" : ", ", r + first_rank_,
                                    seq == 0 ? std::string("before its first collective")
                                             : fmt::format("last in {} #{}", op_name(other.op.load()), seq));
            }
            const std::string why = fmt::format("rank {} waited {} ms in {} #{} for {}", rank_ + first_rank_,
                                                timeout_.count(),
                                                op_name(static_cast<std::uint32_t>(op)), me.seq.load(), late);
            layout_->stalled.fetch_or(stalled, std::memory_order_release);
            abort(why);
            LEVERS_FAIL("collective timed out: {}", why);
        }
        futex_wait(&layout_->generation, gen, std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(100)));
        me.heartbeat_ns.store(now_ns(), std::memory_order_relaxed);
        if (watch_peers_ && layout_->generation.load(std::memory_order_acquire) == gen) {
            const std::uint64_t mine = me.arrivals.load();
            for (int r = 0; r < world_; ++r) {
                const RankRecord& other = layout_->ranks[r];
                if (other.arrivals.load() >= mine || !exited(other.pid.load())) continue;
                const std::string why = fmt::format("rank {} (pid {}) exited while rank {} waited for it in {} #{}",
                                                    r + first_rank_, other.pid.load(), rank_ + first_rank_,
                                                    op_name(static_cast<std::uint32_t>(op)), me.seq.load());
                abort(why);
                LEVERS_FAIL("{}", why);
            }
        }
    }
}

void ShmBackend::check_matching(Op op, std::uint64_t count) {
    const std::uint64_t seq = layout_->ranks[rank_].seq.load();
    for (int r = 0; r < world_; ++r) {
        const RankRecord& other = layout_->ranks[r];
        const std::uint32_t other_op = other.op.load();
        const std::uint64_t other_count = other.count.load();
        if (other.seq.load() != seq || other_op != static_cast<std::uint32_t>(op) || other_count != count) {
            const std::string why = fmt::format(
                "collective mismatch at #{}: rank {} called {} of {} elements, rank {} called {} of {} (#{})", seq,
                rank_ + first_rank_, op_name(static_cast<std::uint32_t>(op)), count, r + first_rank_,
                op_name(other_op), other_count,
                other.seq.load());
            abort(why);
            LEVERS_FAIL("{}", why);
        }
    }
}

void ShmBackend::record(Op op, std::uint64_t count) {
    RankRecord& me = layout_->ranks[rank_];
    me.op.store(static_cast<std::uint32_t>(op));
    me.count.store(count);
    me.seq.fetch_add(1);
}

void ShmBackend::enter(Op op, std::uint64_t count) {
    record(op, count);
    wait_all(op);
    check_matching(op, count);
    wait_all(op);  // nobody moves on to record its next collective before everyone has checked
}

void ShmBackend::barrier() {
    ScopedSeconds timed{timing_.in_collectives};
    enter(Op::barrier, 0);
}

template <class T> void ShmBackend::all_reduce_typed(T* data, std::int64_t n, ReduceOp op) {
    LEVERS_CHECK(n >= 0, "all_reduce of {} elements", n);
    ScopedSeconds timed{timing_.in_collectives};
    if (n == 0) return enter(Op::all_reduce, 0);
    // The hot path of data parallelism: the records are checked after the first
    // piece's barrier instead of in two barriers of their own. That is safe
    // because no rank passes the piece's second barrier before every rank checked.
    record(Op::all_reduce, static_cast<std::uint64_t>(n));
    const std::int64_t piece = static_cast<std::int64_t>(slot_bytes_ / sizeof(T));
    const T scale = op == ReduceOp::mean ? T(1) / static_cast<T>(world_) : T(1);
    for (std::int64_t start = 0; start < n; start += piece) {
        const std::int64_t len = std::min(piece, n - start);
        std::memcpy(slot(rank_), data + start, static_cast<std::size_t>(len) * sizeof(T));
        wait_all(Op::all_reduce);
        if (start == 0) check_matching(Op::all_reduce, static_cast<std::uint64_t>(n));
        // Reduce my chunk of this piece over every slot into my slot. Each chunk
        // is reduced by one rank and copied by all, so every rank gets the same bits.
        auto [lo, hi] = chunk(len, world_, rank_);
        T* mine = reinterpret_cast<T*>(slot(rank_)) + lo;
        for (int r = 0; r < world_; ++r)
            if (r != rank_) add_into(mine, reinterpret_cast<const T*>(slot(r)) + lo, hi - lo);
        if (op == ReduceOp::mean) scale_by(mine, scale, hi - lo);
        wait_all(Op::all_reduce);
        for (int r = 0; r < world_; ++r) {
            auto [a, b] = chunk(len, world_, r);
            std::memcpy(data + start + a, reinterpret_cast<const T*>(slot(r)) + a, static_cast<std::size_t>(b - a) * sizeof(T));
        }
        wait_all(Op::all_reduce);  // slots are free for the next piece
    }
}

void ShmBackend::broadcast(void* data, std::size_t bytes, int root) {
    LEVERS_CHECK(root >= 0 && root < world_, "broadcast root {} is outside the world of {}", root, world_);
    ScopedSeconds timed{timing_.in_collectives};
    enter(Op::broadcast, bytes);
    auto* p = static_cast<std::byte*>(data);
    for (std::size_t start = 0; start < bytes; start += slot_bytes_) {
        const std::size_t len = std::min(slot_bytes_, bytes - start);
        if (rank_ == root) std::memcpy(slot(root), p + start, len);
        wait_all(Op::broadcast);
        if (rank_ != root) std::memcpy(p + start, slot(root), len);
        wait_all(Op::broadcast);
    }
}

template <class T> void ShmBackend::all_gather_typed(T* out, const T* in, std::int64_t n) {
    LEVERS_CHECK(n >= 0, "all_gather of {} elements", n);
    ScopedSeconds timed{timing_.in_collectives};
    enter(Op::all_gather, static_cast<std::uint64_t>(n));
    const std::int64_t piece = static_cast<std::int64_t>(slot_bytes_ / sizeof(T));
    for (std::int64_t start = 0; start < n; start += piece) {
        const std::int64_t len = std::min(piece, n - start);
        std::memcpy(slot(rank_), in + start, static_cast<std::size_t>(len) * sizeof(T));
        wait_all(Op::all_gather);
        for (int r = 0; r < world_; ++r)
            std::memcpy(out + r * n + start, slot(r), static_cast<std::size_t>(len) * sizeof(T));
        wait_all(Op::all_gather);
    }
}

template <class T> void ShmBackend::reduce_scatter_typed(T* out, const T* in, std::int64_t n, ReduceOp op) {
    LEVERS_CHECK(n >= 0, "reduce_scatter of {} elements", n);
    ScopedSeconds timed{timing_.in_collectives};
    enter(Op::reduce_scatter, static_cast<std::uint64_t>(n));
    const std::int64_t piece = static_cast<std::int64_t>(slot_bytes_ / sizeof(T));
    const T scale = op == ReduceOp::mean ? T(1) / static_cast<T>(world_) : T(1);
    auto [own_lo, own_hi] = chunk(n, world_, rank_);
    for (std::int64_t start = 0; start < n; start += piece) {
        const std::int64_t len = std::min(piece, n - start);
        std::memcpy(slot(rank_), in + start, static_cast<std::size_t>(len) * sizeof(T));
        wait_all(Op::reduce_scatter);
        // The part of my output chunk that lies in this piece.
        const std::int64_t lo = std::max(own_lo, start), hi = std::min(own_hi, start + len);
        if (lo < hi) {
            T* dst = out + (lo - own_lo);
            std::memcpy(dst, reinterpret_cast<const T*>(slot(0)) + (lo - start), static_cast<std::size_t>(hi - lo) * sizeof(T));
            for (int r = 1; r < world_; ++r) add_into(dst, reinterpret_cast<const T*>(slot(r)) + (lo - start), hi - lo);
            if (op == ReduceOp::mean) scale_by(dst, scale, hi - lo);
        }
        wait_all(Op::reduce_scatter);
    }
}

namespace {
[[noreturn]] void unsupported(const char* what, DType dtype) {
    LEVERS_FAIL("{} of {}: the shared-memory backend reduces f32 and f64", what, name_of(dtype));
}
}  // namespace

void ShmBackend::all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) {
    if (dtype == DType::f32) return all_reduce_typed(static_cast<float*>(data), n, op);
    if (dtype == DType::f64) return all_reduce_typed(static_cast<double*>(data), n, op);
    unsupported("all_reduce", dtype);
}

void ShmBackend::all_gather(void* out, const void* in, std::int64_t n, DType dtype) {
    if (dtype == DType::f32) return all_gather_typed(static_cast<float*>(out), static_cast<const float*>(in), n);
    if (dtype == DType::f64) return all_gather_typed(static_cast<double*>(out), static_cast<const double*>(in), n);
    unsupported("all_gather", dtype);
}

// Each rank's part is copied into its slot before any rank writes the
// output, so the part may lie inside it.
void ShmBackend::all_gather_in_place(void* data, std::int64_t n, DType dtype) {
    const std::size_t offset = static_cast<std::size_t>(rank_) * static_cast<std::size_t>(n) * size_of(dtype);
    all_gather(data, static_cast<const char*>(data) + offset, n, dtype);
}

void ShmBackend::reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) {
    if (dtype == DType::f32)
        return reduce_scatter_typed(static_cast<float*>(out), static_cast<const float*>(in), n, op);
    if (dtype == DType::f64)
        return reduce_scatter_typed(static_cast<double*>(out), static_cast<const double*>(in), n, op);
    unsupported("reduce_scatter", dtype);
}

}  // namespace levers::dist

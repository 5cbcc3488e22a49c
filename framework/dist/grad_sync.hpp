// Data-parallel gradient averaging that overlaps backward (DDP's buckets).
//
// The flat gradient buffer is cut into buckets of `bucket_elems` from its end
// (models lay parameters out in forward order, so backward finishes the end of
// the buffer first). As backward reports that everything from some offset on
// is final, each bucket lying wholly inside that range is averaged over ranks
// in place on a communication thread while backward goes on; finish() sends
// the rest and waits. Every rank reports the same offsets in the same order,
// so the collectives match.
//
// On cards (a backend that queues_on_card) there is no thread: each bucket's
// all-reduce is queued on the backend's own stream behind an event of the
// compute stream as soon as it is ready, and finish() waits for the last one.
#pragma once

#include "framework/dist/backend.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

namespace levers::dist {

class GradientSync {
public:
    // `grads`: n elements of `dtype` (bf16 only on a card). `card_stream`: the
    // stream backward's kernels run on (cards only).
    GradientSync(Backend& group, void* grads, DType dtype, std::int64_t n, std::int64_t bucket_elems,
                 void* card_stream = nullptr);
    ~GradientSync();
    GradientSync(const GradientSync&) = delete;
    GradientSync& operator=(const GradientSync&) = delete;

    // Gradients in [from, n) will not change again in this step.
    void ready_from(std::int64_t from);
    // Averages whatever is left and returns when every bucket is done (rethrows
    // a communication failure). Then the next step's ready_from calls may begin.
    void finish();

    // Seconds finish() waited for communication (what overlap did not hide),
    // and seconds the communication thread spent in collectives, both so far.
    double exposed_seconds() const { return exposed_; }
    double busy_seconds() const { return busy_; }
    // Of busy_seconds, the part spent waiting at barriers for other ranks.
    double busy_waiting_seconds() const { return busy_waiting_; }

private:
    void enqueue_until(std::int64_t from);
    void run();
    void queue_on_card();  // the queued buckets, onto the backend's stream

    void* card_stream_ = nullptr;
    Backend& group_;
    std::byte* grads_;
    DType dtype_;
    void* at(std::int64_t i) const { return grads_ + i * static_cast<std::int64_t>(size_of(dtype_)); }
    std::int64_t n_, bucket_;
    std::int64_t next_end_;  // buckets [.., next_end_) are not queued yet

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::pair<std::int64_t, std::int64_t>> queue_;
    int in_flight_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    double exposed_ = 0, busy_ = 0, busy_waiting_ = 0;
    std::thread worker_;
};

}  // namespace levers::dist

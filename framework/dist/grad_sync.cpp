#include "framework/dist/grad_sync.hpp"

#include "framework/core/error.hpp"

#include <algorithm>
#include <chrono>

namespace levers::dist {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

GradientSync::GradientSync(Backend& group, void* grads, DType dtype, std::int64_t n, std::int64_t bucket_elems,
                           void* card_stream)
    : group_(group),
      grads_(static_cast<std::byte*>(grads)),
      dtype_(dtype),
      n_(n),
      bucket_(std::max<std::int64_t>(1, bucket_elems)),
      next_end_(n) {
    if (group.queues_on_card()) {
        LEVERS_CHECK(card_stream, "gradients on a card need the stream backward runs on");
        card_stream_ = card_stream;
    } else {
        worker_ = std::thread([this] { run(); });
    }
}

GradientSync::~GradientSync() {
    if (card_stream_) return;
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
}

void GradientSync::enqueue_until(std::int64_t from) {
    // Bucket k covers [n - (k+1)·bucket, n - k·bucket), clipped at 0.
    while (next_end_ > 0) {
        const std::int64_t begin = std::max<std::int64_t>(0, next_end_ - bucket_);
        if (begin < from) break;
        queue_.emplace_back(begin, next_end_);
        next_end_ = begin;
    }
}

void GradientSync::queue_on_card() {
    for (; !queue_.empty(); queue_.pop_front())
        group_.queue_all_reduce(at(queue_.front().first), queue_.front().second - queue_.front().first, dtype_,
                                ReduceOp::mean, card_stream_);
}

void GradientSync::ready_from(std::int64_t from) {
    if (card_stream_) {  // one thread: backward's
        enqueue_until(from);
        return queue_on_card();
    }
    {
        std::lock_guard lock(mutex_);
        enqueue_until(from);
    }
    changed_.notify_all();
}

void GradientSync::finish() {
    const auto start = Clock::now();
    if (card_stream_) {
        enqueue_until(0);
        queue_on_card();
        next_end_ = n_;
        group_.wait_queued();  // what backward's kernels did not hide
        exposed_ += since(start);
        return;
    }
    std::unique_lock lock(mutex_);
    enqueue_until(0);
    changed_.notify_all();
    changed_.wait(lock, [this] { return (queue_.empty() && in_flight_ == 0) || error_; });
    next_end_ = n_;  // the next step starts from the end again
    exposed_ += since(start);
    if (error_) std::rethrow_exception(error_);
}

void GradientSync::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        auto [begin, end] = queue_.front();
        queue_.pop_front();
        ++in_flight_;
        lock.unlock();
        const auto start = Clock::now();
        const double waited_before = group_.timing().waiting;
        try {
            group_.all_reduce(at(begin), end - begin, dtype_, ReduceOp::mean);
        } catch (...) {
            lock.lock();
            error_ = std::current_exception();
            --in_flight_;
            queue_.clear();
            changed_.notify_all();
            continue;
        }
        lock.lock();
        busy_ += since(start);
        busy_waiting_ += group_.timing().waiting - waited_before;
        --in_flight_;
        changed_.notify_all();
    }
}

}  // namespace levers::dist

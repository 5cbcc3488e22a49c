#include "framework/dist/grad_sync.hpp"

#include "framework/core/error.hpp"

#include <algorithm>
#include <chrono>

namespace levers::dist {

FinalFrontier::FinalFrontier(const ParamSet& params, std::function<void(std::int64_t)> ready)
    : params_(params), ready_(std::move(ready)) {}

void FinalFrontier::backward_begins() {
    final_.assign(params_.entries().size(), 1);  // capacity kept: steady steps allocate nothing
    frontier_ = final_.size();
}

void FinalFrontier::will_compute(int entry) { final_[static_cast<std::size_t>(entry)] = 0; }

void FinalFrontier::planned() { advance(); }

void FinalFrontier::grad_final(int entry) {
    final_[static_cast<std::size_t>(entry)] = 1;
    advance();
}

void FinalFrontier::advance() {
    const std::size_t before = frontier_;
    while (frontier_ > 0 && final_[frontier_ - 1]) --frontier_;
    if (frontier_ < before) ready_(params_.entries()[frontier_].offset);
}

GradientSync::GradientSync(Backend& group, void* grads, DType dtype, std::int64_t n, std::int64_t bucket_elems,
                           void* card_stream, Averaging averaging)
    : grads_(static_cast<std::byte*>(grads)),
      dtype_(dtype),
      averaging_(averaging),
      n_(n),
      bucket_(std::max<std::int64_t>(1, bucket_elems)),
      next_end_(n) {
    LEVERS_CHECK(!group.queues_on_card() || card_stream, "gradients on a card need the stream backward runs on");
    queue_ = group.make_queue(group.queues_on_card() ? card_stream : nullptr);
}

void GradientSync::queue_until(std::int64_t from) {
    // Bucket k covers [n - (k+1)·bucket, n - k·bucket), clipped at 0.
    while (next_end_ > 0) {
        const std::int64_t begin = std::max<std::int64_t>(0, next_end_ - bucket_);
        if (begin < from) break;
        last_ = averaging_ == Averaging::chunks ? queue_->reduce_scatter(at(begin), next_end_ - begin, dtype_, ReduceOp::mean)
                                                : queue_->all_reduce(at(begin), next_end_ - begin, dtype_, ReduceOp::mean);
        next_end_ = begin;
    }
}

void GradientSync::ready_from(std::int64_t from) { queue_until(from); }

void GradientSync::finish() {
    const auto start = std::chrono::steady_clock::now();
    queue_until(0);
    next_end_ = n_;  // the next step starts from the end again
    queue_->wait(last_);  // what backward did not hide
    exposed_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace levers::dist

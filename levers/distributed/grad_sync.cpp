#include "levers/distributed/grad_sync.hpp"

#include "levers/core/autograd.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/zero.hpp"

#include <algorithm>
#include <chrono>

namespace levers::dist {

FinalFrontier::FinalFrontier(const ParamSet& params, std::function<void(std::int64_t)> ready, GradientSync* sharded)
    : params_(params), ready_(std::move(ready)), sharded_(sharded) {}

void FinalFrontier::backward_begins() {
    final_.assign(params_.entries().size(), 1);  // capacity kept: steady steps allocate nothing
    frontier_ = final_.size();
}

void FinalFrontier::will_compute(int entry) { final_[static_cast<std::size_t>(entry)] = 0; }

void FinalFrontier::planned() { advance(); }

void FinalFrontier::grad_final(int entry, Tensor& grad) {
    if (sharded_) sharded_->take(entry, grad);
    final_[static_cast<std::size_t>(entry)] = 1;
    advance();
}

Tensor FinalFrontier::grad_storage(int entry) { return sharded_ ? sharded_->storage(entry) : Tensor(); }

void FinalFrontier::advance() {
    const std::size_t before = frontier_;
    while (frontier_ > 0 && final_[frontier_ - 1]) --frontier_;
    if (frontier_ < before) ready_(params_.entries()[frontier_].offset);
}

GradientSync::GradientSync(Backend& group, void* grads, DType dtype, std::int64_t n, std::int64_t bucket_elems,
                           void* gpu_stream)
    : grads_(static_cast<std::byte*>(grads)),
      dtype_(dtype),
      n_(n),
      bucket_(std::max<std::int64_t>(1, bucket_elems)),
      next_end_(n) {
    LEVERS_CHECK(!group.queues_on_gpu() || gpu_stream, "gradients on a GPU need the stream backward runs on");
    queue_ = group.make_queue(group.queues_on_gpu() ? gpu_stream : nullptr);
}

GradientSync::GradientSync(Backend& group, ParamSet& params, std::int64_t bucket_elems, void* gpu_stream)
    : GradientSync(group, nullptr, params.grad_dtype(), params.size(), bucket_elems, gpu_stream) {
    sharded_ = &params;
    const FlatShard* shard = params.sharded_grads();
    LEVERS_CHECK(shard != nullptr, "ZeRO-2's gradient buckets need a set that keeps a shard of its gradients");
    std::int64_t at = shard->size();  // the chunks lie in the shard in buffer order; buckets come from its end
    for (const auto& [begin, end] : gradient_buckets(n_, bucket_)) {
        const auto [lo, hi] = Backend::chunk(end - begin, group.world_size(), group.rank());
        at -= hi - lo;
        buckets_.push_back({.begin = begin, .end = end, .lo = lo, .hi = hi, .at = at});
    }
    LEVERS_CHECK(at == 0, "the set's shard ({} elements) is not this rank's chunks of these buckets", shard->size());
}

GradientSync::~GradientSync() {
    // A failed step may leave collectives queued on these buckets' memory: they finish (or fail) first.
    if (!in_flight_.empty()) try {
            queue_->wait(buckets_[in_flight_.back()].work);
        } catch (...) {  // the failure is being reported by whoever unwinds
        }
}

std::size_t GradientSync::bucket_of(std::int64_t element) const {
    return static_cast<std::size_t>((n_ - 1 - element) / bucket_);  // bucket k ends at n - k·bucket
}

Tensor& GradientSync::memory_of(Bucket& b) {
    if (!b.memory.defined()) b.memory = Tensor::zeros({b.end - b.begin}, dtype_, sharded_->device());
    return b.memory;
}

Tensor GradientSync::storage(int entry) {
    const ParamSet::Entry& e = sharded_->entry(entry);
    const std::int64_t numel = e.shape.numel();
    if (numel == 0) return {};
    const std::size_t k = bucket_of(e.offset);
    if (k != bucket_of(e.offset + numel - 1)) return {};  // it straddles two: take() copies it in
    Bucket& b = buckets_[k];
    return memory_of(b).slice(e.offset - b.begin, e.offset - b.begin + numel).view(e.shape);
}

void GradientSync::take(int entry, Tensor& grad) {
    const ParamSet::Entry& e = sharded_->entry(entry);
    const std::int64_t numel = e.shape.numel();
    if (grad.defined() && numel > 0 && bucket_of(e.offset) != bucket_of(e.offset + numel - 1)) {
        const Tensor flat = grad.view({numel});
        for (std::size_t k = bucket_of(e.offset + numel - 1); k <= bucket_of(e.offset); ++k) {
            Bucket& b = buckets_[k];
            const std::int64_t lo = std::max(b.begin, e.offset), hi = std::min(b.end, e.offset + numel);
            memory_of(b).slice(lo - b.begin, hi - b.begin).copy_from(flat.slice(lo - e.offset, hi - e.offset));
        }
    }
    grad = Tensor();  // a view of its bucket, or copied into it: either way the bucket holds it now
}

void GradientSync::drain_oldest() {
    Bucket& b = buckets_[in_flight_.front()];
    in_flight_.pop_front();
    queue_->wait(b.work);
    if (b.hi > b.lo) {
        const Tensor mine = sharded_->grads().slice(b.at, b.at + (b.hi - b.lo));
        autograd::add_into(mine, mine, b.memory.slice(b.lo, b.hi));
    }
    b.memory = Tensor();  // back to the pool; on a GPU, after the add queued on the same stream
}

void GradientSync::queue_until(std::int64_t from) {
    if (sharded_) {
        for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= from; ++next_bucket_) {
            Bucket& b = buckets_[next_bucket_];
            // Memory even where no gradient was written (parameters this pass did not use): zeros.
            b.work = last_ = queue_->reduce_scatter(memory_of(b).raw(), b.end - b.begin, dtype_, ReduceOp::mean);
            in_flight_.push_back(next_bucket_);
            while (in_flight_.size() > kInFlight) drain_oldest();
        }
        return;
    }
    // Bucket k covers [n - (k+1)·bucket, n - k·bucket), clipped at 0.
    while (next_end_ > 0) {
        const std::int64_t begin = std::max<std::int64_t>(0, next_end_ - bucket_);
        if (begin < from) break;
        last_ = queue_->all_reduce(at(begin), next_end_ - begin, dtype_, ReduceOp::mean);
        next_end_ = begin;
    }
}

void GradientSync::ready_from(std::int64_t from) { queue_until(from); }

void GradientSync::finish() {
    const auto start = std::chrono::steady_clock::now();
    queue_until(0);
    next_end_ = n_;  // the next step starts from the end again
    next_bucket_ = 0;
    queue_->wait(last_);  // what backward did not hide
    while (!in_flight_.empty()) drain_oldest();
    exposed_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace levers::dist

#include "levers/distributed/collective_queue.hpp"

#include "levers/core/clock.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace levers::dist {

namespace {

class ThreadQueue final : public CollectiveQueue {
public:
    explicit ThreadQueue(Backend& group) : group_(group), worker_([this] { run(); }) {}

    ~ThreadQueue() override {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        changed_.notify_all();
        worker_.join();
    }

    Work all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override {
        return push({data, n, dtype, op, Kind::all_reduce});
    }

    Work reduce_scatter(void* data, std::int64_t n, DType dtype, ReduceOp op) override {
        return push({data, n, dtype, op, Kind::reduce_scatter});
    }

    Work all_gather(void* data, std::int64_t n, DType dtype) override {
        return push({data, n, dtype, ReduceOp::sum, Kind::all_gather});
    }

    void wait(Work w) override {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return done_ >= w.ticket || error_; });
        if (error_) std::rethrow_exception(error_);
    }

    Backend::Timing busy() const override {
        std::lock_guard lock(mutex_);
        return busy_;
    }

private:
    enum class Kind { all_reduce, reduce_scatter, all_gather };
    struct Item {
        void* data;
        std::int64_t n;
        DType dtype;
        ReduceOp op;
        Kind kind;
    };

    Work push(const Item& item) {
        std::lock_guard lock(mutex_);
        queue_.push_back(item);
        changed_.notify_all();
        return {++queued_};
    }

    void run_one(const Item& item) {
        if (item.kind == Kind::all_reduce) return group_.all_reduce(item.data, item.n, item.dtype, item.op);
        if (item.kind == Kind::all_gather) return group_.all_gather_in_place(item.data, item.n, item.dtype);
        const auto lo = Backend::chunk(item.n, group_.world_size(), group_.rank()).first;
        void* mine = static_cast<char*>(item.data) + static_cast<std::size_t>(lo) * size_of(item.dtype);
        group_.reduce_scatter(mine, item.data, item.n, item.dtype, item.op);
    }

    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            const Item item = queue_.front();
            queue_.pop_front();
            lock.unlock();
            const auto start = Clock::now();
            const double waited_before = group_.timing().waiting;
            std::exception_ptr failed;
            try {
                run_one(item);
            } catch (...) {
                failed = std::current_exception();
            }
            lock.lock();
            busy_.in_collectives += std::chrono::duration<double>(Clock::now() - start).count();
            busy_.waiting += group_.timing().waiting - waited_before;
            if (failed) {  // the group is failing: what is queued after it cannot match the other ranks
                error_ = failed;
                queue_.clear();
            }
            ++done_;
            changed_.notify_all();
        }
    }

    Backend& group_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Item> queue_;
    std::uint64_t queued_ = 0, done_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    Backend::Timing busy_;
    std::thread worker_;  // last: it starts once the rest is made
};

}  // namespace

std::unique_ptr<CollectiveQueue> make_thread_queue(Backend& group) { return std::make_unique<ThreadQueue>(group); }

}  // namespace levers::dist

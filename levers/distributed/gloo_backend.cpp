// Host collectives between nodes through Gloo's TCP transport: the process
// group among one leader per node (hierarchical_backend.hpp), or among every
// rank (flat). Built as liblevers_gloo.so where Debian's libgloo-dev is, and
// opened by gloo_group.cpp when a CPU job spans nodes, so no other job maps Gloo
// (or the InfiniBand and Redis libraries Debian's build links).
#include "levers/distributed/gloo_group.hpp"

#include "levers/core/clock.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/store.hpp"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <vector>

namespace levers::dist {

namespace {

// Gloo's message without the "[gloo/source.cc:123] " it starts with: its source lines are not for users.
std::string what_happened(const gloo::Exception& e) {
    std::string s = e.what();
    if (s.starts_with('[')) {
        const auto close = s.find("] ");
        if (close != std::string::npos) s.erase(0, close + 2);
    }
    return s;
}

// Gloo's rendezvous store over levers' own (the job's TCP store).
class StoreForGloo final : public gloo::rendezvous::Store {
public:
    explicit StoreForGloo(dist::Store& store) : store_(store) {}
    void set(const std::string& key, const std::vector<char>& data) override {
        store_.set(key, std::string(data.begin(), data.end()));
    }
    std::vector<char> get(const std::string& key) override {
        const std::string v = store_.get(key);
        return {v.begin(), v.end()};
    }
    void wait(const std::vector<std::string>& keys) override {
        for (const auto& k : keys) (void)store_.get(k);  // get waits, within the store's timeout
    }
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

private:
    dist::Store& store_;
};

class GlooBackend final : public Backend {
public:
    GlooBackend(int rank, int world, dist::Store& store, const std::string& prefix, const std::string& member,
                const std::string& host, const std::string& iface, std::chrono::milliseconds timeout)
        : rank_(rank), world_(world), member_(member), timeout_(timeout) {
        gloo::transport::tcp::attr attr;
        if (!iface.empty())
            attr.iface = iface;
        else
            attr.hostname = host;
        try {
            device_ = gloo::transport::tcp::CreateDevice(attr);
            StoreForGloo adapter(store);
            gloo::rendezvous::PrefixStore scoped(prefix, adapter);
            auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
            context->setTimeout(timeout);
            context->connectFullMesh(scoped, device_);
            context_ = std::move(context);
        } catch (const gloo::Exception& e) {
            LEVERS_FAIL("{} {} of {}: the Gloo group on {} did not form: {}", member, rank, world,
                        iface.empty() ? host : "interface " + iface, what_happened(e));
        }
        // Where each peer is, for the messages that say whom a failure cut off.
        store.set(fmt::format("{}/host/{}", prefix, rank), host);
        for (int r = 0; r < world; ++r)
            if (r != rank)
                peers_ += fmt::format("{}{} {} at {}", peers_.empty() ? "" : ", ", member, r,
                                      store.get(fmt::format("{}/host/{}", prefix, r)));
    }

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    std::string name() const override { return "Gloo (TCP)"; }

    using Backend::all_gather;
    using Backend::all_reduce;
    using Backend::reduce_scatter;

    void barrier() override {
        run("barrier", [&] {
            gloo::BarrierOptions opts(context_);
            opts.setTag(next_tag());
            gloo::barrier(opts);
        });
    }

    void all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override {
        if (n == 0) return;
        run("all_reduce", [&] {
            switch (dtype) {
                case DType::f32: return reduce<float>(data, n, op);
                case DType::f64: return reduce<double>(data, n, op);
                case DType::i32: return reduce<std::int32_t>(data, n, op);
                default: LEVERS_FAIL("Gloo all_reduce: dtype {} is not carried on the CPU", name_of(dtype));
            }
        });
    }

    void broadcast(void* data, std::size_t bytes, int root) override {
        if (bytes == 0) return;
        run("broadcast", [&] {
            gloo::BroadcastOptions opts(context_);
            opts.setOutput(static_cast<char*>(data), bytes);
            opts.setRoot(root);
            opts.setTag(next_tag());
            gloo::broadcast(opts);
        });
    }

    void all_gather(void* out, const void* in, std::int64_t n, DType dtype) override {
        const std::size_t bytes = static_cast<std::size_t>(n) * size_of(dtype);
        if (bytes == 0) return;
        run("all_gather", [&] {
            gloo::AllgatherOptions opts(context_);
            opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
            opts.setOutput(static_cast<char*>(out), bytes * static_cast<std::size_t>(world_));
            opts.setTag(next_tag());
            gloo::allgather(opts);
        });
    }

    void reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) override {
        reduce_scatter_by_all_reduce(out, in, n, dtype, op, scratch_);
    }

    // Gloo has no abort: later collectives here fail, and the peers' ones fail
    // as this rank's sockets close when it exits (or time out).
    void abort(const std::string& why) override { aborted_ = why; }

    Timing timing() const override { return timing_; }

private:
    template <class T> void reduce(void* data, std::int64_t n, ReduceOp op) {
        T* p = static_cast<T*>(data);
        gloo::AllreduceOptions opts(context_);
        opts.setOutput(p, static_cast<std::size_t>(n));
        opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<T>));
        opts.setTag(next_tag());
        gloo::allreduce(opts);
        if (op == ReduceOp::mean) sum_to_mean(p, n, dtype_of<T>(), world_);
    }

    template <class F> void run(const char* what, F&& f) {
        LEVERS_CHECK(aborted_.empty(), "{} {}: the Gloo group was aborted: {}", member_, rank_, aborted_);
        const auto start = Clock::now();
        try {
            f();
        } catch (const gloo::Exception& e) {
            aborted_ = what_happened(e);
            LEVERS_FAIL("{} {}: Gloo {} #{} failed: a peer exited, or its link is down, or it did not answer within "
                        "{} ms (its peers: {}): {}",
                        member_, rank_, what, tag_, timeout_.count(), peers_, aborted_);
        }
        timing_.in_collectives += seconds_since(start);
    }

    std::uint32_t next_tag() { return ++tag_; }

    int rank_, world_;
    std::string member_;  // what its ranks are: "rank", or "node" for the nodes' leaders
    std::string peers_;   // "node 1 at 10.0.0.2"
    std::chrono::milliseconds timeout_;
    std::shared_ptr<gloo::transport::Device> device_;
    std::shared_ptr<gloo::Context> context_;
    std::uint32_t tag_ = 0;
    std::vector<char> scratch_;
    std::string aborted_;
    Timing timing_;
};

}  // namespace

}  // namespace levers::dist

extern "C" levers::dist::Backend* levers_make_gloo_backend(int rank, int world, levers::dist::Store* store,
                                                          const char* prefix, const char* member, const char* host,
                                                          const char* iface, long timeout_ms) {
    return new levers::dist::GlooBackend(rank, world, *store, prefix, member, host, iface,
                                         std::chrono::milliseconds(timeout_ms));
}

#include "levers/distributed/collective_queue.hpp"
#include "tests/distributed/run_ranks.hpp"

#include <string>
#include <vector>

using namespace levers;
using namespace std::chrono_literals;

TEST_CASE("queued all-reduces run in order on the communication thread; a handle waits for those before it too") {
    auto ok = testing::run_ranks(3, 256, 10s, [](dist::ShmBackend& b) {
        auto queue = b.make_queue(nullptr);
        std::vector<std::vector<float>> buffers(5, std::vector<float>(40));
        std::vector<dist::Work> work;
        for (std::size_t k = 0; k < buffers.size(); ++k) {
            for (auto& x : buffers[k]) x = static_cast<float>(b.rank() * 10 + k);
            work.push_back(queue->all_reduce(buffers[k].data(), 40, DType::f32, dist::ReduceOp::sum));
        }
        bool good = work.front().ticket == 1 && work.back().ticket == 5;
        queue->wait(work[2]);  // buckets 0..2 are done now, whatever became of 3 and 4
        for (std::size_t k = 0; k <= 2; ++k) good &= buffers[k][39] == static_cast<float>(30 + 3 * k);
        queue->wait(work.back());
        for (std::size_t k = 0; k < buffers.size(); ++k) good &= buffers[k][0] == static_cast<float>(30 + 3 * k);
        good &= queue->busy().in_collectives > 0;
        queue->wait(dist::Work{});  // nothing: returns at once
        return good;
    });
    for (bool o : ok) CHECK(o);
}

TEST_CASE("a failing queued collective is rethrown by wait, naming the rank that aborted") {
    auto ok = testing::run_ranks(2, 256, 10s, [](dist::ShmBackend& b) {
        if (b.rank() == 1) {
            b.abort("disk full");
            return true;
        }
        auto queue = b.make_queue(nullptr);
        std::vector<float> x(8, 1.0f);
        const dist::Work first = queue->all_reduce(x.data(), 8, DType::f32, dist::ReduceOp::mean);
        const dist::Work second = queue->all_reduce(x.data(), 8, DType::f32, dist::ReduceOp::mean);
        try {
            queue->wait(second);
        } catch (const std::exception& e) {
            const bool named = std::string(e.what()).find("aborted by rank 1: disk full") != std::string::npos;
            try {
                queue->wait(first);  // the failure stays: later waits see it too
            } catch (const std::exception&) {
                return named;
            }
        }
        return false;
    });
    for (bool o : ok) CHECK(o);
}

TEST_CASE("a host group cannot order its queued collectives after a GPU's stream") {
    auto ok = testing::run_ranks(1, 256, 1s, [](dist::ShmBackend& b) {
        int stream = 0;
        try {
            b.make_queue(&stream);
        } catch (const std::exception& e) {
            return std::string(e.what()).find("runs collectives on the host") != std::string::npos;
        }
        return false;
    });
    CHECK(ok[0]);
}

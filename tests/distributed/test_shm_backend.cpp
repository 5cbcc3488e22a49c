#include "levers/core/error.hpp"
#include "tests/distributed/run_ranks.hpp"

#include <filesystem>
#include <sys/stat.h>
#include <thread>

using namespace levers;
using levers::dist::ReduceOp;
using levers::dist::ShmBackend;
using namespace std::chrono_literals;

namespace {

// Small slots, so every length above a few dozen elements goes in pieces.
constexpr std::size_t kSlot = 256;

// Rank r's input element i: integers, so float sums are exact.
template <class T> T value(int rank, std::int64_t i) { return static_cast<T>(rank * 1000 + i % 997); }

template <class T> bool check_all_reduce(ShmBackend& b, std::int64_t n, ReduceOp op) {
    std::vector<T> data(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) data[i] = value<T>(b.rank(), i);
    b.all_reduce(data.data(), n, op);
    for (std::int64_t i = 0; i < n; ++i) {
        T expect = 0;
        for (int r = 0; r < b.world_size(); ++r) expect += value<T>(r, i);
        if (op == ReduceOp::mean) expect /= static_cast<T>(b.world_size());
        if (data[i] != expect) return false;  // every rank sums in the same order: exact
    }
    return true;
}

bool check_broadcast(ShmBackend& b, std::int64_t n, int root) {
    std::vector<double> data(static_cast<std::size_t>(n), -1.0);
    if (b.rank() == root)
        for (std::int64_t i = 0; i < n; ++i) data[i] = value<double>(root, i);
    b.broadcast(data.data(), data.size() * sizeof(double), root);
    for (std::int64_t i = 0; i < n; ++i)
        if (data[i] != value<double>(root, i)) return false;
    return true;
}

bool check_all_gather(ShmBackend& b, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n * b.world_size()), -1);
    for (std::int64_t i = 0; i < n; ++i) in[i] = value<float>(b.rank(), i);
    b.all_gather(out.data(), in.data(), n);
    for (int r = 0; r < b.world_size(); ++r)
        for (std::int64_t i = 0; i < n; ++i)
            if (out[r * n + i] != value<float>(r, i)) return false;
    return true;
}

bool check_reduce_scatter(ShmBackend& b, std::int64_t n) {
    std::vector<double> in(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) in[i] = value<double>(b.rank(), i);
    auto [lo, hi] = ShmBackend::chunk(n, b.world_size(), b.rank());
    std::vector<double> out(static_cast<std::size_t>(hi - lo), -1);
    b.reduce_scatter(out.data(), in.data(), n, ReduceOp::sum);
    for (std::int64_t i = lo; i < hi; ++i) {
        double expect = 0;
        for (int r = 0; r < b.world_size(); ++r) expect += value<double>(r, i);
        if (out[i - lo] != expect) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("every collective, world sizes 1 to 4, awkward lengths, real processes") {
    const std::int64_t lengths[] = {0, 1, 3, 31, 64, 65, 1000, 4099};  // 64 floats fill a 256-byte slot
    for (int world = 1; world <= 4; ++world) {
        CAPTURE(world);
        std::string error;  // rank 0's, if it threw
        auto ok = testing::run_ranks(world, kSlot, 10s, [&](ShmBackend& b) {
            bool good = true;
            for (std::int64_t n : lengths) {
                good &= check_all_reduce<float>(b, n, ReduceOp::sum);
                good &= check_all_reduce<double>(b, n, ReduceOp::sum);
                good &= check_all_reduce<double>(b, n, ReduceOp::mean);
                good &= check_broadcast(b, n, b.world_size() - 1);
                good &= check_all_gather(b, n);
                good &= check_reduce_scatter(b, n);
                b.barrier();
            }
            return good;
        }, &error);
        CAPTURE(error);
        for (int r = 0; r < world; ++r) {
            CAPTURE(r);
            CHECK(ok[static_cast<std::size_t>(r)]);
        }
    }
}

TEST_CASE("chunks split any length into world nearly equal, contiguous parts") {
    for (std::int64_t n : {0, 1, 5, 7, 100}) {
        for (int world : {1, 2, 3, 4, 8}) {
            std::int64_t next = 0;
            for (int r = 0; r < world; ++r) {
                auto [lo, hi] = ShmBackend::chunk(n, world, r);
                CHECK(lo == next);
                CHECK(hi - lo <= n / world + 1);
                next = hi;
            }
            CHECK(next == n);
        }
    }
}

TEST_CASE("a rank that never arrives is named when the others time out") {
    std::string error;
    auto ok = testing::run_ranks(
        3, kSlot, 300ms,
        [](ShmBackend& b) {
            if (b.rank() == 2) return true;  // leaves without calling the barrier
            b.barrier();                     // throws on ranks 0 and 1
            return false;
        },
        &error);
    CHECK_FALSE(ok[0]);
    CHECK(ok[2]);
    INFO(error);
    CHECK(error.find("for rank 2 (before its first collective)") != std::string::npos);
    CHECK(error.find("in barrier #1") != std::string::npos);
}

TEST_CASE("ranks calling different collectives are told so instead of hanging") {
    auto ok = testing::run_ranks(2, kSlot, 5s, [](ShmBackend& b) {
        try {
            std::vector<float> x(10);
            if (b.rank() == 0)
                b.all_reduce(x.data(), 10, ReduceOp::sum);
            else
                b.broadcast(x.data(), 40, 0);
        } catch (const Error& e) {
            return std::string(e.what()).find("collective mismatch at #1") != std::string::npos;
        }
        return false;
    });
    CHECK(ok[0]);
    CHECK(ok[1]);
}

TEST_CASE("abort on one rank fails the others' collectives with its reason") {
    auto ok = testing::run_ranks(3, kSlot, 5s, [](ShmBackend& b) {
        if (b.rank() == 1) {
            b.abort("disk full");
            return true;
        }
        try {
            b.barrier();
        } catch (const Error& e) {
            return std::string(e.what()).find("aborted by rank 1: disk full") != std::string::npos;
        }
        return false;
    });
    for (bool o : ok) CHECK(o);
}

TEST_CASE("segments are private to their owner and removed with it") {
    std::string name = dist::ShmSegment::unique_name();
    CHECK(name != dist::ShmSegment::unique_name());
    const auto path = std::filesystem::path("/dev/shm") / name;
    {
        auto seg = dist::ShmSegment::create(name, 4096);
        struct stat st {};
        REQUIRE(stat(path.c_str(), &st) == 0);
        CHECK((st.st_mode & 0777) == 0600);
        CHECK_THROWS_WITH_AS(dist::ShmSegment::create(name, 4096), doctest::Contains("cannot create"), Error);
        auto other = dist::ShmSegment::open(name);
        CHECK(other.size() == 4096);
    }
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK_THROWS_WITH_AS(dist::ShmSegment::open(name), doctest::Contains("cannot open shared-memory segment"), Error);
}

TEST_CASE("a group refuses memory that is not laid out, and bad ranks") {
    std::vector<std::byte> junk(ShmBackend::segment_bytes(2, kSlot));
    CHECK_THROWS_WITH_AS(ShmBackend(junk.data(), junk.size(), 0, 1s), doctest::Contains("not a levers process group"),
                         Error);
    ShmBackend::initialize(junk.data(), junk.size(), 2, kSlot);
    CHECK_THROWS_WITH_AS(ShmBackend(junk.data(), junk.size(), 2, 1s), doctest::Contains("rank 2 is outside"), Error);
}

TEST_CASE("the shared-memory store: waits, counters, set-once values, clear refusals") {
    auto ok = testing::run_ranks(2, kSlot, 2s, [](ShmBackend& b) {
        dist::ShmStore& s = *b.store();
        if (b.rank() == 1) {
            std::this_thread::sleep_for(50ms);  // rank 0's get must wait for this
            s.set("late", "here");
        }
        bool good = s.get("late") == "here";
        good &= s.add("n", 5) > 0;
        b.barrier();
        good &= s.get("n") == "10";
        s.wait({"late", "n"});
        if (b.rank() == 0) {
            try {
                s.set("late", "other");
                good = false;
            } catch (const Error& e) {
                good &= std::string(e.what()).find("already set to another value") != std::string::npos;
            }
            try {
                s.set(std::string(65, 'k'), "v");
                good = false;
            } catch (const Error& e) {
                good &= std::string(e.what()).find("must be 1 to 64 bytes") != std::string::npos;
            }
        }
        try {  // both ranks at once, so neither waits for the other in a barrier meanwhile
            s.get("never");
            good = false;
        } catch (const Error& e) {
            good &= std::string(e.what()).find("store key 'never' was not set within 2000 ms") != std::string::npos;
        }
        b.barrier();
        return good;
    });
    CHECK(ok[0]);
    CHECK(ok[1]);
}

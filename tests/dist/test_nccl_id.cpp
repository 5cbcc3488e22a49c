// NCCL's unique id travels from rank 0 to every rank through the job's store;
// the exchange is tested here with real processes, no card needed.
#include "framework/core/error.hpp"
#include "framework/dist/nccl_id.hpp"
#include "framework/dist/shm_backend.hpp"
#include "tests/dist/run_ranks.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::dist;

TEST_CASE("hex text of an id reads back, and malformed text is refused") {
    const std::vector<unsigned char> id = {0, 1, 0x7f, 0x80, 0xff, 0x10};
    CHECK(to_hex(id) == "00017f80ff10");
    CHECK(from_hex(to_hex(id), id.size()) == id);
    CHECK_THROWS_WITH_AS(from_hex("0001", 6), doctest::Contains("6 bytes was expected"), Error);
    CHECK_THROWS_WITH_AS(from_hex("zz", 1), doctest::Contains("not hex"), Error);
}

TEST_CASE("rank 0's id reaches every rank through the shared-memory store") {
    constexpr std::size_t kBytes = 128;  // sizeof(ncclUniqueId)
    auto ok = testing::run_ranks(3, std::size_t{1} << 16, std::chrono::seconds(10), [](ShmBackend& b) {
        auto store = b.store();
        StoreAccess access{[&](const std::string& k, const std::string& v) { store.set(k, v); },
                           [&](const std::string& k) { return store.get(k); }};
        auto made = [] {
            std::vector<unsigned char> id(kBytes);
            for (std::size_t i = 0; i < kBytes; ++i) id[i] = static_cast<unsigned char>(i * 7 + 3);
            return id;
        };
        auto got = share_id(b.rank(), access, "levers/nccl_id", made, kBytes);
        return got == made();
    });
    CHECK(ok == std::vector<bool>{true, true, true});
}

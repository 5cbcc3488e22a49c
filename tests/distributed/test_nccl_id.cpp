// NCCL's unique id travels from rank 0 to every rank through the job's store;
// the exchange is tested here with real processes, no GPU needed.
#include "levers/core/error.hpp"
#include "levers/distributed/nccl_id.hpp"
#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/tcp_store.hpp"
#include "tests/distributed/run_ranks.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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
        auto made = [] {
            std::vector<unsigned char> id(kBytes);
            for (std::size_t i = 0; i < kBytes; ++i) id[i] = static_cast<unsigned char>(i * 7 + 3);
            return id;
        };
        auto got = share_id(b.rank(), *b.store(), "levers/nccl_id", made, kBytes);
        return got == made();
    });
    CHECK(ok == std::vector<bool>{true, true, true});
}

namespace {
// A port nobody listens on now (the kernel's choice for port 0).
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    ::close(fd);
    return ntohs(addr.sin_port);
}

// Runs body(rank) in `n` processes started at once; each must exit 0 (body's
// return value; a throw exits 2).
void in_processes(int n, const std::function<int(int rank)>& body) {
    std::vector<pid_t> pids;
    for (int rank = 0; rank < n; ++rank) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int code = 2;
            try {
                code = body(rank);
            } catch (...) {
            }
            ::_exit(code);
        }
        pids.push_back(pid);
    }
    for (pid_t pid : pids) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
}
}  // namespace

TEST_CASE("across nodes: rank 0's id reaches workers started by hand through the TCP store") {
    // What srun / torchrun --nnodes / mpirun jobs do: separate processes meet
    // at rank 0's TCP store (MASTER_ADDR:MASTER_PORT) and take the id from it.
    constexpr std::size_t kBytes = 128;
    const int port = free_port();
    in_processes(3, [&](int rank) {
        TcpStore store("127.0.0.1", port, rank == 0, "job-token", std::chrono::seconds(10));
        const std::vector<unsigned char> made(kBytes, static_cast<unsigned char>(0xa5));
        const auto got = share_id(rank, store, "levers/nccl_id", [&] { return made; }, kBytes);
        // Rank 0's store must outlive the workers that have not connected yet.
        store.add("done", 1);
        while (rank == 0 && store.add("done", 0) < 3) ::usleep(1000);
        return got == made ? 0 : 3;
    });
}

TEST_CASE("rank 0's TCP store answers its peers' last requests before it closes") {
    // As in a rendezvous: the ranks meet (every one has connected), then each
    // makes one last request and is done. Rank 0 used to close its peers'
    // connections as soon as its own last request was answered, failing
    // theirs ("Broken pipe", "End of file") in about one start of three.
    for (int round = 0; round < 10; ++round) {
        CAPTURE(round);
        const int port = free_port();
        in_processes(3, [&](int rank) {
            TcpStore store("127.0.0.1", port, rank == 0, "", std::chrono::seconds(10));
            store.add("met", 1);
            while (store.add("met", 0) < 3) ::usleep(1000);
            store.add("levers/joined", 1);
            return 0;
        });
    }
}

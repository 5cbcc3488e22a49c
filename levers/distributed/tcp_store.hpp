// A key-value store over TCP for ranks that an external launcher started
// (torchrun, Slurm, mpirun): rank 0 serves it at MASTER_ADDR:MASTER_PORT,
// every rank (rank 0 too) talks to it as a client. Like c10d's TCPStore:
// set, get (waits until the key exists), add (atomic counter), each with a
// timeout. The server listens only on MASTER_ADDR (loopback by default);
// when a job token is given, clients that do not present it are refused.
// Rank 0's store, when destroyed, first waits (up to the timeout) for its
// peers to hang up, so their last requests are answered.
#pragma once

#include "levers/distributed/store.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace levers::dist {

class TcpStore final : public Store {
public:
    // rank 0 passes serve = true. Connecting retries until `timeout`.
    TcpStore(const std::string& host, int port, bool serve, const std::string& token,
             std::chrono::milliseconds timeout);
    ~TcpStore();

    void set(const std::string& key, const std::string& value) override;
    std::string get(const std::string& key) override;
    std::int64_t add(const std::string& key, std::int64_t delta) override;

private:
    struct Server;
    struct Client;
    std::unique_ptr<Server> server_;
    std::unique_ptr<Client> client_;
    std::chrono::milliseconds timeout_;
};

}  // namespace levers::dist

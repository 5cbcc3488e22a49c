#include "levers/launch/rendezvous.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/gpu_staged_backend.hpp"
#include "levers/distributed/gloo_group.hpp"
#include "levers/distributed/hierarchical_backend.hpp"
#include "levers/distributed/nccl_group.hpp"
#include "levers/distributed/tcp_store.hpp"
#include "levers/launch/job_segment.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace levers::launch {

namespace {

// Across nodes on GPUs: one NCCL communicator whose id goes through the TCP store.
JoinedGroup join_gpus_across_nodes(const RankEnv& env, dist::TcpStore& store, int gpu,
                                    std::chrono::milliseconds timeout) {
    JoinedGroup g;
    g.gpu_backend = dist::make_nccl_backend(env.rank, env.world_size, gpu, store, timeout);
    g.backend = std::make_unique<dist::GpuStagedBackend>(*g.gpu_backend);
    store.add("levers/joined", 1);
    return g;
}

// This node's address on the route to `master`: where the other nodes reach it.
std::string address_towards(const std::string& master) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    LEVERS_CHECK(getaddrinfo(master.c_str(), "9", &hints, &found) == 0 && found,
                 "MASTER_ADDR {}: no such host", master);
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in mine{};
    socklen_t len = sizeof mine;
    const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len) == 0;  // no packet is sent
    freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    LEVERS_CHECK(ok, "MASTER_ADDR {}: no route to it from this node", master);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &mine.sin_addr, text, sizeof text);
    return text;
}

// One node's ranks in a shared-memory segment: its local rank 0 makes it and
// publishes its name under `key`.
dist::ShmSegment node_segment(dist::Store& store, const std::string& key, int local_rank, int local_world) {
    const std::size_t slot = std::size_t{2} << 20;
    if (local_rank != 0) return dist::ShmSegment::open(store.get(key));
    dist::ShmSegment::sweep_stale();
    const std::size_t bytes = JobSegment::bytes(local_world, slot);
    auto seg = dist::ShmSegment::create(dist::ShmSegment::unique_name(), bytes);
    JobSegment::initialize(seg.data(), bytes, local_world, slot);
    store.set(key, seg.name());
    return seg;
}

// The node's group; its messages name the job's ranks (the node's first is `first_rank`).
std::unique_ptr<dist::ShmBackend> node_group(const dist::ShmSegment& segment, int local_rank, int first_rank,
                                             std::chrono::milliseconds timeout) {
    return std::make_unique<dist::ShmBackend>(JobSegment::group_memory(segment.data()),
                                              JobSegment::group_bytes(segment.size()), local_rank, timeout,
                                              dist::ShmBackend::Options{.watch_peers = true, .first_rank = first_rank});
}

// Across nodes on CPUs: shared memory within each node, Gloo among one leader
// per node (or, with LEVERS_NODE_ALLREDUCE=flat, Gloo among every rank).
JoinedGroup join_cpus_across_nodes(const RankEnv& env, dist::TcpStore& store, const std::string& master,
                                   std::chrono::milliseconds timeout) {
    const int local = env.local_world_size, nodes = env.world_size / local;
    const char* ifname = env::get("GLOO_SOCKET_IFNAME");
    const std::string host = address_towards(master), iface = ifname ? ifname : "";
    const char* mode = env::get("LEVERS_NODE_ALLREDUCE");
    JoinedGroup g;
    if (mode && std::string(mode) == "flat") {
        g.backend =
            dist::make_gloo_backend(env.rank, env.world_size, store, "levers/gloo/all", "rank", host, iface, timeout);
    } else {
        const int node = env.rank / local;
        g.segment = node_segment(store, fmt::format("levers/segment/{}", node), env.local_rank, local);
        // The node's ranks wait a little longer than their leader: a failure between nodes,
        // which the leader sees at its timeout, is the one they report.
        auto local_group = node_group(*g.segment, env.local_rank, env.rank - env.local_rank,
                                      timeout + std::chrono::seconds(2));
        std::unique_ptr<dist::Backend> leaders;
        if (env.local_rank == 0)
            leaders = dist::make_gloo_backend(node, nodes, store, "levers/gloo/leaders", "node", host, iface, timeout);
        g.backend = std::make_unique<dist::HierarchicalBackend>(node, nodes, std::move(local_group), std::move(leaders));
    }
    g.backend->barrier();  // everyone has mapped the node's segment...
    if (g.segment) g.segment->remove();  // ...so its name can go now
    store.add("levers/joined", 1);
    return g;
}

}  // namespace

JoinedGroup join_external(const RankEnv& env, std::chrono::milliseconds timeout, int gpu) {
    const bool across_nodes = env.local_world_size != env.world_size;
    // torchrun's defaults, so mpirun or srun on one node needs no extra variables. A job on one
    // node keeps its store on loopback; only one across nodes listens on MASTER_ADDR.
    const std::string master = env.master_addr.empty() ? "127.0.0.1" : env.master_addr;
    const std::string addr = across_nodes ? master : "127.0.0.1";
    int port = env.master_port > 0 ? env.master_port : 29500;
    // torchrun's agent already serves its own store on MASTER_PORT: levers' goes next to it.
    if (const char* agent = env::get("TORCHELASTIC_USE_AGENT_STORE"); agent && std::string(agent) == "True") ++port;
    if (const char* own = env::get("LEVERS_STORE_PORT")) port = std::atoi(own);
    if (across_nodes && gpu < 0) {  // refused before any rank waits for the others
        const int local = env.local_world_size;
        LEVERS_CHECK(env.world_size % local == 0 && env.rank % local == env.local_rank,
                     "rank {}: a job across nodes needs its ranks numbered node by node, as many on each (rank = node "
                     "x {} + local rank; got local rank {} of {} in a world of {})",
                     env.rank, local, env.local_rank, local, env.world_size);
        const char* mode = env::get("LEVERS_NODE_ALLREDUCE");
        LEVERS_CHECK(!mode || std::string(mode) == "hierarchical" || std::string(mode) == "flat",
                     "LEVERS_NODE_ALLREDUCE={}: expected hierarchical (the default) or flat", mode);
    }
    const char* token = env::get("LEVERS_JOB_TOKEN");
    dist::TcpStore store(addr, port, env.rank == 0, token ? token : "", timeout);
    if (across_nodes)
        return gpu >= 0 ? join_gpus_across_nodes(env, store, gpu, timeout)
                         : join_cpus_across_nodes(env, store, master, timeout);
    JoinedGroup g;
    g.segment = node_segment(store, "levers/segment", env.rank, env.world_size);
    g.backend = node_group(*g.segment, env.rank, 0, timeout);
    g.backend->barrier();  // everyone has mapped the segment...
    g.segment->remove();   // ...so its name can go now
    store.add("levers/joined", 1);
    return g;
}

}  // namespace levers::launch

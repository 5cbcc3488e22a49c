#include "framework/launch/rendezvous.hpp"

#include "framework/core/environment.hpp"
#include "framework/core/error.hpp"
#include "framework/dist/card_staged_backend.hpp"
#include "framework/dist/tcp_store.hpp"
#include "framework/launch/job_segment.hpp"

#include "framework/dist/nccl_group.hpp"

#include <cstdlib>
#include <string>

namespace levers::launch {

namespace {
// Across nodes: one NCCL communicator whose id goes through the TCP store.
JoinedGroup join_across_nodes(const RankEnv& env, dist::TcpStore& store, int card,
                              std::chrono::milliseconds timeout) {
    JoinedGroup g;
    g.card_backend = dist::make_nccl_backend(env.rank, env.world_size, card, store, timeout);
    g.backend = std::make_unique<dist::CardStagedBackend>(*g.card_backend);
    store.add("levers/joined", 1);
    return g;
}
}  // namespace

JoinedGroup join_external(const RankEnv& env, std::chrono::milliseconds timeout, int card) {
    // torchrun's defaults, so mpirun or srun on one node needs no extra variables.
    const std::string addr = env.master_addr.empty() ? "127.0.0.1" : env.master_addr;
    int port = env.master_port > 0 ? env.master_port : 29500;
    // torchrun's agent already serves its own store on MASTER_PORT: levers' goes next to it.
    if (const char* agent = env::get("TORCHELASTIC_USE_AGENT_STORE"); agent && std::string(agent) == "True") ++port;
    if (const char* own = env::get("LEVERS_STORE_PORT")) port = std::atoi(own);
    const bool across_nodes = env.local_world_size != env.world_size;
    LEVERS_CHECK(!across_nodes || card >= 0,
                 "this job spans nodes ({} ranks, {} on this node); CPU ranks across nodes are not supported yet: "
                 "run it on cards (--device cuda), where NCCL carries it",
                 env.world_size, env.local_world_size);
    const char* token = env::get("LEVERS_JOB_TOKEN");
    dist::TcpStore store(addr, port, env.rank == 0, token ? token : "", timeout);
    if (across_nodes) return join_across_nodes(env, store, card, timeout);
    const std::size_t slot = std::size_t{2} << 20;
    const std::size_t bytes = JobSegment::bytes(env.world_size, slot);
    JoinedGroup g;
    g.segment = [&] {
        if (env.rank != 0) return dist::ShmSegment::open(store.get("levers/segment"));
        dist::ShmSegment::sweep_stale();
        auto seg = dist::ShmSegment::create(dist::ShmSegment::unique_name(), bytes);
        JobSegment::initialize(seg.data(), bytes, env.world_size, slot);
        store.set("levers/segment", seg.name());
        return seg;
    }();
    g.backend = std::make_unique<dist::ShmBackend>(JobSegment::group_memory(g.segment->data()),
                                                   JobSegment::group_bytes(g.segment->size()), env.rank, timeout);
    g.backend->barrier();  // everyone has mapped the segment...
    g.segment->remove();   // ...so its name can go now
    store.add("levers/joined", 1);
    return g;
}

}  // namespace levers::launch

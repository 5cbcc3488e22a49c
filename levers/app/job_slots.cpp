#include "levers/app/job_slots.hpp"

#include "levers/app/workspace.hpp"
#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/launch/slot_ledger.hpp"
#include "levers/recipe/device_choice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

namespace levers {

void check_job_fits(int ranks, Device::Kind device) {
    const NodeSlots node = node_slots(device);
    load_workspace().check(ranks, node.count, node.unit);
    // As mpirun would: more CPU ranks than cores run, but each shares a core.
    if (device == Device::Kind::cpu && ranks > node.count && !env::get("LEVERS_GPUS"))
        fmt::print("recipe: {} ranks on {} CPU slot{}: ranks share cores (oversubscribed), so each runs slower\n",
                   ranks, node.count, node.count == 1 ? "" : "s");
}

std::vector<int> take_slots(const Recipe& r, int ranks, int threads, bool wait, Device::Kind device) {
    if (const char* given = env::get("LEVERS_GPUS")) return parse_int_list("LEVERS_GPUS", given, 0);
    auto ledger = launch::SlotLedger::for_node(device == Device::Kind::cuda ? node_gpu_count() : 0);
    // A CPU job uses every core unless --threads says how many per rank.
    const int slots = static_cast<int>(ledger.slots().size());
    const bool cuda = ledger.kind() == Device::Kind::cuda;
    const int need = cuda ? ranks : threads > 0 ? std::min(slots, ranks * threads) : slots;
    launch::job_lease() = ledger.acquire(need, r.name(), wait, [](const std::string& what) {
        fmt::print("recipe: {}\n", what);
        std::fflush(stdout);
    });
    return launch::job_lease().slots();
}

void announce_placement(const Recipe& r, int ranks, int threads, const std::vector<int>& slots, Device::Kind device,
                        DType compute, const std::filesystem::path& dir) {
    const std::size_t n = slots.size();
    const char* what = ranks == 1 ? "process" : "ranks";
    if (device == Device::Kind::cuda)
        fmt::print("recipe {}: {} {} on GPU{} {} ({}), {}; run directory {}\n", r.name(), ranks, what,
                   n == 1 ? "" : "s", fmt::join(slots, ","),
                   gpu_names().at(static_cast<std::size_t>(runtime_index(slots[0]))), name_of(compute),
                   dir.string());
    else
        fmt::print("recipe {}: {} CPU {}, {} thread{} each, on slot{} {}; run directory {}\n", r.name(), ranks, what,
                   threads, threads == 1 ? "" : "s", n == 1 ? "" : "s", fmt::join(slots, ","), dir.string());
    std::fflush(stdout);
}

}  // namespace levers

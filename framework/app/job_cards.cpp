#include "framework/app/job_cards.hpp"

#include "framework/app/workspace.hpp"
#include "framework/core/environment.hpp"
#include "framework/core/error.hpp"
#include "framework/core/gpu.hpp"
#include "framework/launch/card_ledger.hpp"
#include "framework/recipe/device_choice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

namespace levers {

void check_job_fits(int ranks, bool cuda) {
    const NodeCards node = node_cards(cuda ? "cuda" : "cpu");
    load_workspace().check(ranks, node.count, node.unit);
    // As mpirun would: more CPU ranks than cores run, but each shares a core.
    if (!cuda && ranks > node.count && !env::get("LEVERS_CARDS"))
        fmt::print("recipe: {} ranks on {} CPU slot{}: ranks share cores (oversubscribed), so each runs slower\n",
                   ranks, node.count, node.count == 1 ? "" : "s");
}

std::vector<int> take_cards(const Plan& r, int ranks, int threads, bool wait, bool cuda) {
    if (const char* given = env::get("LEVERS_CARDS")) return parse_int_list("LEVERS_CARDS", given, 0);
    auto ledger = launch::CardLedger::for_node(cuda ? node_gpu_count() : 0);
    // A CPU job uses every core unless --threads says how many per rank.
    const int slots = static_cast<int>(ledger.cards().size());
    const int need = ledger.kind() != "cpu" ? ranks : threads > 0 ? std::min(slots, ranks * threads) : slots;
    launch::job_lease() = ledger.acquire(need, r.name(), wait, [](const std::string& what) {
        fmt::print("recipe: {}\n", what);
        std::fflush(stdout);
    });
    return launch::job_lease().cards();
}

void announce_placement(const Plan& r, int ranks, int threads, const std::vector<int>& cards, bool cuda,
                        const std::filesystem::path& dir) {
    const std::size_t slots = cards.size();
    const char* what = ranks == 1 ? "process" : "ranks";
    if (cuda)
        fmt::print("recipe {}: {} {} on card{} {} ({}), {}; run directory {}\n", r.name(), ranks, what,
                   slots == 1 ? "" : "s", fmt::join(cards, ","),
                   gpu_names().at(static_cast<std::size_t>(runtime_index(cards[0]))), name_of(compute_dtype()),
                   dir.string());
    else
        fmt::print("recipe {}: {} CPU {}, {} thread{} each, on slot{} {}; run directory {}\n", r.name(), ranks, what,
                   threads, threads == 1 ? "" : "s", slots == 1 ? "" : "s", fmt::join(cards, ","), dir.string());
    std::fflush(stdout);
}

}  // namespace levers

#include "framework/dist/backend.hpp"

#include "framework/core/error.hpp"
#include "framework/dist/collective_queue.hpp"

namespace levers::dist {

std::pair<std::int64_t, std::int64_t> Backend::chunk(std::int64_t n, int world, int rank) {
    return {n * rank / world, n * (rank + 1) / world};
}

std::unique_ptr<CollectiveQueue> Backend::make_queue(void* after) {
    LEVERS_CHECK(!after, "the {} backend runs collectives on the host; it cannot order them after a card's stream",
                 name());
    return make_thread_queue(*this);
}

}  // namespace levers::dist

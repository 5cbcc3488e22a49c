#include "framework/dist/backend.hpp"

#include "framework/core/error.hpp"

namespace levers::dist {

std::pair<std::int64_t, std::int64_t> Backend::chunk(std::int64_t n, int world, int rank) {
    return {n * rank / world, n * (rank + 1) / world};
}

void Backend::queue_all_reduce(void*, std::int64_t, DType, ReduceOp, void*) {
    LEVERS_FAIL("the {} backend cannot queue collectives on a card", name());
}

void Backend::wait_queued() {}

}  // namespace levers::dist

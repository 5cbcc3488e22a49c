#include "levers/distributed/backend.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/collective_queue.hpp"

#include <cstring>
#include <type_traits>

namespace levers::dist {

std::pair<std::int64_t, std::int64_t> Backend::chunk(std::int64_t n, int world, int rank) {
    return {n * rank / world, n * (rank + 1) / world};
}

namespace {
template <class T> void to_mean(T* p, std::int64_t n, int world) {
    if constexpr (std::is_floating_point_v<T>) {
        const T scale = T(1) / static_cast<T>(world);
        for (std::int64_t i = 0; i < n; ++i) p[i] *= scale;
    } else {
        for (std::int64_t i = 0; i < n; ++i) p[i] /= static_cast<T>(world);
    }
}
}  // namespace

void Backend::sum_to_mean(void* data, std::int64_t n, DType dtype, int world) {
    switch (dtype) {
        case DType::f32: return to_mean(static_cast<float*>(data), n, world);
        case DType::f64: return to_mean(static_cast<double*>(data), n, world);
        case DType::i32: return to_mean(static_cast<std::int32_t*>(data), n, world);
        default: LEVERS_FAIL("a mean of dtype {} over ranks is not computed on the host", name_of(dtype));
    }
}

void Backend::reduce_scatter_by_all_reduce(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op,
                                           std::vector<char>& scratch) {
    const std::size_t w = size_of(dtype);
    scratch.assign(static_cast<const char*>(in), static_cast<const char*>(in) + static_cast<std::size_t>(n) * w);
    all_reduce(scratch.data(), n, dtype, op);
    const auto [lo, hi] = chunk(n, world_size(), rank());
    std::memcpy(out, scratch.data() + static_cast<std::size_t>(lo) * w, static_cast<std::size_t>(hi - lo) * w);
}

void Backend::all_gather_in_place(void* data, std::int64_t n, DType dtype) {
    const std::size_t bytes = static_cast<std::size_t>(n) * size_of(dtype);
    const char* mine = static_cast<const char*>(data) + static_cast<std::size_t>(rank()) * bytes;
    std::vector<char> part(mine, mine + bytes);
    all_gather(data, part.data(), n, dtype);
}

std::unique_ptr<CollectiveQueue> Backend::make_queue(void* after) {
    LEVERS_CHECK(!after, "the {} backend runs collectives on the host; it cannot order them after a GPU's stream",
                 name());
    return make_thread_queue(*this);
}

}  // namespace levers::dist

#include "levers/distributed/nccl_group.hpp"

#include "levers/core/device_runtime.hpp"
#include "levers/core/error.hpp"

namespace levers::dist {

std::unique_ptr<Backend> make_nccl_backend(int rank, int world, int device, Store& store,
                                           std::chrono::milliseconds timeout) {
    auto make = reinterpret_cast<decltype(&levers_make_nccl_backend)>(device_backend_symbol("levers_make_nccl_backend"));
    LEVERS_CHECK(make != nullptr, "GPU {}: NCCL comes with the CUDA backend, and {}", device,
                 device_backend_error().empty() ? "the loaded backend has no NCCL" : device_backend_error());
    return std::unique_ptr<Backend>(make(rank, world, device, &store, static_cast<long>(timeout.count())));
}

}  // namespace levers::dist

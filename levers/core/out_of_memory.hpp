// Out of memory on a device, as one error type: what was asked, where, and
// what was left. (Apart from storage_pool.hpp, which CUDA kernel files
// include through device_memory.hpp: no fmt there.)
#pragma once

#include "levers/core/error.hpp"

#include <cstddef>
#include <string>

namespace levers {

// A device that could not give the memory asked for (a pool's block or a
// persistent buffer): what was asked, where, and what was left. The
// framework's loop answers it on a GPU with the run's memory plan.
class OutOfMemory : public Error {
public:
    OutOfMemory(const std::string& where, std::size_t asked, const std::string& left);
    std::size_t asked() const { return asked_; }

private:
    std::size_t asked_;
};

}  // namespace levers

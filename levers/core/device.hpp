// Where a tensor's memory lives and where its ops run. (No fmt: CUDA kernel
// files include this through levers/core/kernel.hpp.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace levers {

struct Device {
    enum class Kind { cpu, cuda };
    static constexpr int kKinds = 2;
    Kind kind = Kind::cpu;
    int index = 0;  // GPU number for cuda; unused for cpu

    static Device cpu() { return {}; }
    static Device cuda(int gpu) { return {Kind::cuda, gpu}; }
    bool is_cpu() const { return kind == Kind::cpu; }
    bool operator==(const Device&) const = default;
    std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

inline const char* name_of(Device::Kind k) { return k == Device::Kind::cpu ? "cpu" : "cuda"; }
// The kind `name` names ("cpu" or "cuda"), or none.
inline std::optional<Device::Kind> kind_named(std::string_view name) {
    if (name == "cpu") return Device::Kind::cpu;
    if (name == "cuda") return Device::Kind::cuda;
    return std::nullopt;
}

}  // namespace levers

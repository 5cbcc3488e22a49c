// Where a tensor's memory lives and where its ops run.
#pragma once

#include <fmt/format.h>

#include <string>

namespace levers {

struct Device {
    enum class Kind { cpu, cuda };
    Kind kind = Kind::cpu;
    int index = 0;  // card number for cuda; unused for cpu

    static Device cpu() { return {}; }
    static Device cuda(int card) { return {Kind::cuda, card}; }
    bool is_cpu() const { return kind == Kind::cpu; }
    bool operator==(const Device&) const = default;
    std::string str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }
};

}  // namespace levers

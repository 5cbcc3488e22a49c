#include "levers/core/environment.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace levers::env {

const char* get_even_empty(std::string_view name) {
    for (const Section& s : kSections)
        for (const Variable& v : s.variables)
            if (v.name == name) return std::getenv(v.name.data());  // the table's names are literals: NUL-terminated
    LEVERS_FAIL("environment variable {} is read but not declared in levers/core/environment.hpp", name);
}

const char* get(std::string_view name) {
    const char* value = get_even_empty(name);
    return value && *value ? value : nullptr;
}

std::string manual() {
    std::string text = "Environment variables levers reads (an empty value counts as unset, but for "
                       "CUDA_VISIBLE_DEVICES):\n";
    for (const Section& s : kSections) {
        text += fmt::format("\n{}:\n", s.title);
        for (const Variable& v : s.variables) text += fmt::format("  {:<30} {}\n", v.name, v.meaning);
    }
    return text;
}

}  // namespace levers::env

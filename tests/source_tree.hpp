// Files of the source tree the tests read (reference outputs committed under
// tests/reference/): meson test sets LEVERS_SOURCE_ROOT to the tree.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

namespace levers::testing {

inline std::filesystem::path source_path(const std::filesystem::path& relative) {
    const char* root = std::getenv("LEVERS_SOURCE_ROOT");
    REQUIRE_MESSAGE(root != nullptr, "LEVERS_SOURCE_ROOT must name the source tree (meson test sets it)");
    return std::filesystem::path(root) / relative;
}

}  // namespace levers::testing

#include "levers/core/error.hpp"

#include <string_view>

namespace levers {

void throw_error(const char* file, int line, const std::string& message) {
    // Keep the path from the project root only: users see "levers/kernels/cpu/x.cpp:12". The last root named
    // in the path is the project's (its checkout may itself sit in a folder called levers/).
    std::string_view path(file);
    std::size_t from = std::string_view::npos;
    for (std::string_view root : {"levers/", "recipes/", "tests/", "bench/", "examples/"})
        if (auto at = path.rfind(root); at != std::string_view::npos && (from == std::string_view::npos || at > from))
            from = at;
    if (from != std::string_view::npos) path.remove_prefix(from);
    throw Error(fmt::format("{}:{}", path, line), message);
}

}  // namespace levers

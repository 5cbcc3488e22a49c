#include "framework/core/error.hpp"

#include <string_view>

namespace levers {

void throw_error(const char* file, int line, const std::string& message) {
    // Keep the path from the project root only: users see "kernels/cpu/x.cpp:12".
    std::string_view path(file);
    for (std::string_view root : {"framework/", "kernels/", "models/", "recipes/", "tests/", "bench/"}) {
        if (auto at = path.rfind(root); at != std::string_view::npos) {
            path.remove_prefix(at);
            break;
        }
    }
    throw Error(fmt::format("{}:{}", path, line), message);
}

}  // namespace levers

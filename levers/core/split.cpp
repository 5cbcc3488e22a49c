#include "levers/core/split.hpp"

namespace levers {

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> items;
    for (std::size_t start = 0;;) {
        const std::size_t end = text.find(separator, start);
        items.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) return items;
        start = end + 1;
    }
}

}  // namespace levers

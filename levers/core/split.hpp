#pragma once
// Splitting the comma-separated lists of flags and environment variables.

#include <string>
#include <string_view>
#include <vector>

namespace levers {

// The items of `text` between separators, empty ones kept (callers name them
// in their errors): "a,,b" is {"a", "", "b"}, "" is {""}.
std::vector<std::string> split(std::string_view text, char separator = ',');

}  // namespace levers

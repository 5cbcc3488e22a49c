// JSON-lines files (one JSON object per line, blank lines skipped), as the
// fine-tuning recipes read their examples, pairs and prompts.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>

namespace levers::data {

// Calls `each` with every line's value and where it is ("FILE line N", for
// errors; `each` says what a line must hold). Throws levers::Error naming the
// file when it cannot be read (`what`: what its lines hold, for that
// message) or the line that is not JSON.
void for_each_json_line(const std::filesystem::path& path, const std::string& what,
                        const std::function<void(const nlohmann::ordered_json& line, const std::string& where)>& each);

}  // namespace levers::data

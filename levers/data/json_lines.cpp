#include "levers/data/json_lines.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>

#include <fstream>

namespace levers::data {

void for_each_json_line(const std::filesystem::path& path, const std::string& what,
                        const std::function<void(const nlohmann::ordered_json&, const std::string&)>& each) {
    std::ifstream in(path);
    LEVERS_CHECK(in.good(), "{}: no such file ({}, one JSON object per line)", path.string(), what);
    std::string line;
    for (long number = 1; std::getline(in, line); ++number) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = fmt::format("{} line {}", path.string(), number);
        nlohmann::ordered_json record;
        try {
            record = nlohmann::ordered_json::parse(line);
        } catch (const nlohmann::ordered_json::exception&) {
            LEVERS_FAIL("{}: not JSON", where);
        }
        each(record, where);
    }
}

}  // namespace levers::data

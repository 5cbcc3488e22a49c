#include "levers/app/bench/bench_output.hpp"

#include "levers/core/error.hpp"
#include "levers/launch/slot_ledger.hpp"
#include "levers/recipe/run_dir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>

namespace levers::bench {

namespace fs = std::filesystem;

void report(const std::vector<std::vector<std::string>>& rows, const fs::path& csv, const fs::path& markdown) {
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (std::size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
    std::ofstream c(csv), md(markdown);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        std::string line;
        for (std::size_t k = 0; k < rows[r].size(); ++k) line += fmt::format("{:>{}}  ", rows[r][k], width[k]);
        fmt::print("{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
        c << fmt::format("{}\n", fmt::join(rows[r], ","));
        md << fmt::format("| {} |\n", fmt::join(rows[r], " | "));
        if (r == 0) md << fmt::format("|{}\n", fmt::join(std::vector<std::string>(rows[0].size(), "---|"), ""));
    }
    LEVERS_CHECK(c.good() && md.good(), "cannot write {} or {}", csv.string(), markdown.string());
}

std::vector<int> default_gpus() {
    const int gpus = static_cast<int>(launch::SlotLedger::for_node().slots().size());
    std::vector<int> out;
    for (int g = 1; g <= std::min(gpus, 8); g *= 2) out.push_back(g);
    return out;
}

fs::path bench_dir(const std::string& recipe, const std::string& out, const std::string& kind) {
    return make_run_dir(recipe, out, "bench-" + kind + "-");
}

}  // namespace levers::bench

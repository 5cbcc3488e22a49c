// What the `recipe bench` commands share: a results directory per benchmark,
// and tables printed on the console and written as CSV and Markdown.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace levers::bench {

// Prints `rows` (the first is the header) as an aligned table and writes them
// as CSV and as a Markdown table.
void report(const std::vector<std::vector<std::string>>& rows, const std::filesystem::path& csv,
            const std::filesystem::path& markdown);

// Powers of two up to the node's GPUs (at most 8).
std::vector<int> default_gpus();

// runs/RECIPE/bench-KIND-<date-time>, or `out`.
std::filesystem::path bench_dir(const std::string& recipe, const std::string& out, const std::string& kind);

}  // namespace levers::bench

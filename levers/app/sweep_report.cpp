#include "levers/app/sweep.hpp"

#include "levers/core/error.hpp"
#include "levers/recipe/run_dir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <set>

namespace levers {

namespace fs = std::filesystem;

namespace {

// The scalar entries of a result, for the table and the CSV.
// Named "result.NAME" where a parameter has the same name.
std::vector<std::string> metric_names(const std::vector<CellOutcome>& cells) {
    std::set<std::string> names;
    for (const auto& c : cells)
        if (c.ok && c.result.is_object())
            for (const auto& [k, v] : c.result.items())
                if (v.is_number() || v.is_boolean()) names.insert(k);
    return {names.begin(), names.end()};
}

std::vector<std::string> param_names(const std::vector<CellOutcome>& cells) {
    std::set<std::string> names;
    for (const auto& c : cells)
        for (const auto& [k, v] : c.params) names.insert(k);
    return {names.begin(), names.end()};
}

std::string column_name(const std::string& metric, const std::vector<std::string>& params) {
    return std::find(params.begin(), params.end(), metric) == params.end() ? metric : "result." + metric;
}

std::string metric_text(const CellOutcome& c, const std::string& name) {
    if (!c.ok || !c.result.contains(name)) return "";
    const auto& v = c.result.at(name);
    if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
    return v.dump();
}

}  // namespace

void print_sweep_table(const std::vector<CellOutcome>& cells) {
    const auto params = param_names(cells), metrics = metric_names(cells);
    std::vector<std::vector<std::string>> rows = {{"cell"}};
    for (const auto& p : params) rows[0].push_back(p);
    rows[0].insert(rows[0].end(), {"status", "wall_s"});
    for (const auto& m : metrics) rows[0].push_back(column_name(m, params));
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const auto& c = cells[i];
        std::vector<std::string> row = {fmt::format("{:02}", i)};
        for (const auto& p : params) row.push_back(c.params.count(p) ? c.params.at(p) : "");
        row.push_back(c.ok ? "ok" : "FAILED");
        row.push_back(fmt::format("{:.1f}", c.seconds));
        for (const auto& m : metrics) row.push_back(metric_text(c, m));
        rows.push_back(std::move(row));
    }
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (std::size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t k = 0; k < row.size(); ++k) line += fmt::format("{:<{}}  ", row[k], width[k]);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        fmt::print("{}\n", line);
    }
}

void write_sweep_report(const fs::path& dir, const std::vector<CellOutcome>& cells) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& c : cells) all.push_back(c.to_json());
    write_json_file(dir / "sweep.json", all);

    const auto params = param_names(cells), metrics = metric_names(cells);
    std::ofstream csv(dir / "sweep.csv");
    std::vector<std::string> header = {"cell"};
    header.insert(header.end(), params.begin(), params.end());
    header.insert(header.end(), {"status", "wall_s"});
    for (const auto& m : metrics) header.push_back(column_name(m, params));
    csv << fmt::format("{}\n", fmt::join(header, ","));
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const auto& c = cells[i];
        std::vector<std::string> row = {std::to_string(i)};
        for (const auto& p : params) row.push_back(c.params.count(p) ? c.params.at(p) : "");
        row.push_back(c.ok ? "ok" : "failed");
        row.push_back(fmt::format("{:.3f}", c.seconds));
        for (const auto& m : metrics) row.push_back(metric_text(c, m));
        // Values holding a comma (list parameters) are quoted, as CSV readers expect.
        for (auto& v : row)
            if (v.find(',') != std::string::npos) v = "\"" + v + "\"";
        csv << fmt::format("{}\n", fmt::join(row, ","));
    }
    LEVERS_CHECK(csv.good(), "cannot write {}", (dir / "sweep.csv").string());
}

}  // namespace levers

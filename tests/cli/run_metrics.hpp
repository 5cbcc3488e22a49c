// Reading what a run wrote to its directory, for the CLI tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace levers::testing {

inline std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// metrics.csv rows from step `from` on, as "step,loss,lr,grad_norm" (the wall-clock columns dropped).
inline std::vector<std::string> curve(const std::filesystem::path& run, long from) {
    std::istringstream in(read_text(run / "metrics.csv"));
    std::string line;
    std::vector<std::string> rows;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        if (std::stol(line.substr(0, line.find(','))) < from) continue;
        std::size_t cut = 0;
        for (int commas = 0; commas < 4; ++commas) cut = line.find(',', cut) + 1;
        rows.push_back(line.substr(0, cut - 1));
    }
    return rows;
}

// The training loss of each step from `from` on.
inline std::vector<double> losses(const std::filesystem::path& run, long from) {
    std::vector<double> out;
    for (const auto& row : curve(run, from)) {
        const std::size_t a = row.find(',') + 1;
        out.push_back(std::stod(row.substr(a, row.find(',', a) - a)));
    }
    return out;
}

}  // namespace levers::testing

// Reading what a run wrote to its directory, and checking it, for the CLI tests.
#pragma once

#include "levers/core/checkpoint.hpp"
#include "tests/process.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
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

// metrics.jsonl's training rows (every metric a step logged), in order.
inline std::vector<nlohmann::json> train_rows(const std::filesystem::path& run) {
    std::ifstream in(run / "metrics.jsonl");
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);)
        if (auto j = nlohmann::json::parse(line); j["kind"] == "train") out.push_back(j);
    return out;
}

// Two checkpoints hold the same tensors, bit for bit.
inline void same_checkpoints(const std::filesystem::path& a, const std::filesystem::path& b) {
    const auto x = read_checkpoint(a), y = read_checkpoint(b);
    REQUIRE(x.tensors.size() == y.tensors.size());
    for (std::size_t i = 0; i < x.tensors.size(); ++i)
        CHECK(std::memcmp(x.tensors[i].tensor.raw(), y.tensors[i].tensor.raw(), x.tensors[i].tensor.bytes()) == 0);
}

// `recipe ARGS`, which must succeed (its output shown where it does not).
inline Ran ran_ok(const std::vector<std::string>& args) {
    const Ran r = run_recipe(args);
    INFO(r.output);
    REQUIRE(r.code == 0);
    return r;
}

}  // namespace levers::testing

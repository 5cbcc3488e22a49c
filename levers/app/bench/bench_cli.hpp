// The `recipe bench` subcommands on the command line (CLI11).
#pragma once

#include "levers/app/bench/bench_commands.hpp"

#include <CLI/CLI.hpp>

namespace levers {
class Examples;
}

namespace levers::bench {

class BenchCli {
public:
    // Adds `bench scaling|shapes|predict`, their help's examples made by `ex`.
    BenchCli(CLI::App& app, const Examples& ex);
    bool parsed() const;
    int run() const;  // throws levers::Error for bad input

private:
    CLI::App *bench_ = nullptr, *scaling_ = nullptr, *shapes_ = nullptr, *predict_ = nullptr;
    ScalingFlags scaling_flags_;
    ShapesFlags shapes_flags_;
    PredictFlags predict_flags_;
    std::string scaling_gpus_, predict_gpus_;  // "1,2,4" as given
    bool seeds_ = false;
};

}  // namespace levers::bench

#include "levers/app/plot.hpp"

#include "levers/app/command.hpp"
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace levers {

namespace fs = std::filesystem;

namespace {

struct Series {
    fs::path dir;
    std::string title;
};

// The runs to draw: each directory, or a sweep's cells (titled by their parameters).
std::vector<Series> expand(const std::vector<fs::path>& runs) {
    std::vector<Series> out;
    for (const auto& run : runs) {
        if (fs::exists(run / "sweep.json")) {
            const auto cells = nlohmann::json::parse(read_file(run / "sweep.json"), nullptr, false);
            LEVERS_CHECK(cells.is_array(), "{}: sweep.json is not a list of cells", run.string());
            for (const auto& c : cells) {
                std::vector<std::string> params;
                const nlohmann::json given = c.value("params", nlohmann::json::object());
                for (const auto& [k, v] : given.items())
                    params.push_back(k + "=" + v.get<std::string>());
                out.push_back({c.value("dir", ""), fmt::format("{}", fmt::join(params, " "))});
            }
            continue;
        }
        LEVERS_CHECK(fs::exists(run / "metrics.csv"), "{}: no metrics.csv (give run directories, or a sweep's)",
                     run.string());
        out.push_back({run, run.filename().string()});
    }
    return out;
}

std::vector<std::string> eval_columns(const fs::path& dir) {
    std::istringstream in(read_file(dir / "eval.csv"));
    std::string header, name;
    std::getline(in, header);
    std::vector<std::string> names;
    std::istringstream cols(header);
    while (std::getline(cols, name, ',')) names.push_back(name);
    return names;  // step, wall_s, metrics...
}

// `metric` of each training step in metrics.jsonl, as "step value" lines in `to`; the metrics the run did
// log, when it is not one of them. Returns the number of steps written.
std::size_t write_metric(const fs::path& run, const std::string& metric, const fs::path& to,
                         std::set<std::string>& logged) {
    std::istringstream in(fs::exists(run / "metrics.jsonl") ? read_file(run / "metrics.jsonl") : "");
    std::ofstream file(to);
    std::size_t steps = 0;
    for (std::string line; std::getline(in, line);) {
        const auto row = nlohmann::json::parse(line, nullptr, false);
        if (!row.is_object() || row.value("kind", "") != "train") continue;
        for (const auto& [name, value] : row.items())
            if (value.is_number()) logged.insert(name);
        if (!row.contains(metric) || !row[metric].is_number()) continue;
        file << row.value("step", 0L) << ' ' << row[metric].get<double>() << '\n';
        ++steps;
    }
    return steps;
}

void plot_metric(const std::vector<Series>& series, const fs::path& out, const std::string& metric) {
    const fs::path tmp = fs::temp_directory_path() / fmt::format("levers-plot-{}", ::getpid());
    fs::create_directories(tmp);
    std::vector<std::string> lines;
    std::set<std::string> logged;
    for (std::size_t i = 0; i < series.size(); ++i) {
        const fs::path data = tmp / fmt::format("{}.dat", i);
        if (write_metric(series[i].dir, metric, data, logged) > 0)
            lines.push_back(fmt::format("{} using 1:2 with lines lw 1 title {}", gnuplot_quoted(data.string()),
                                        gnuplot_quoted(series[i].title)));
    }
    const auto drawn = [&] {
        LEVERS_CHECK(!lines.empty(), "--metric {}: no training step of the runs logged it (they logged: {})", metric,
                     fmt::join(logged, ", "));
        run_gnuplot(fmt::format("set terminal pngcairo size 900,520 font ',10'\nset output {}\n"
                                "set termoption noenhanced\nset key top right\nset grid\nset title {}\n"
                                "set xlabel 'step'\nplot {}\n",
                                gnuplot_quoted(out.string()), gnuplot_quoted(metric + " (every step)"),
                                fmt::join(lines, ", \\\n     ")),
                    out);
    };
    try {
        drawn();
    } catch (...) {
        fs::remove_all(tmp);
        throw;
    }
    fs::remove_all(tmp);
}

}  // namespace

void plot_runs(const std::vector<fs::path>& runs, const fs::path& out, const std::string& metric) {
    LEVERS_CHECK(!runs.empty(), "recipe plot needs at least one run directory");
    const auto series = expand(runs);
    if (!metric.empty()) return plot_metric(series, out, metric);
    std::vector<std::string> loss, evals;
    for (const auto& s : series) {
        if (!fs::exists(s.dir / "metrics.csv")) continue;  // a cell that failed before training
        loss.push_back(fmt::format("{} using 1:2 with lines lw 1 title {}",
                                   gnuplot_quoted((s.dir / "metrics.csv").string()), gnuplot_quoted(s.title)));
        if (!fs::exists(s.dir / "eval.csv")) continue;
        const auto cols = eval_columns(s.dir);
        for (std::size_t c = 2; c < cols.size(); ++c)
            evals.push_back(fmt::format("{} using 1:{} with linespoints lw 2 title {}",
                                        gnuplot_quoted((s.dir / "eval.csv").string()), c + 1,
                                        gnuplot_quoted(series.size() == 1 ? cols[c] : s.title + ": " + cols[c])));
    }
    LEVERS_CHECK(!loss.empty(), "none of the runs has recorded a training step yet");
    std::string script = fmt::format(
        "set terminal pngcairo size 1400,520 font ',10'\nset output {}\nset datafile separator ','\n"
        "set termoption noenhanced\nset key top right\nset grid\nset multiplot layout 1,{}\n"
        "set title 'training loss (every step)'\nset xlabel 'step'\nplot {}\n",
        gnuplot_quoted(out.string()), evals.empty() ? 1 : 2, fmt::join(loss, ", \\\n     "));
    if (!evals.empty())
        script += fmt::format("set title 'evaluation'\nset key center right\nset xlabel 'step'\nplot {}\n",
                              fmt::join(evals, ", \\\n     "));
    script += "unset multiplot\n";

    run_gnuplot(script, out);
}

void run_gnuplot(const std::string& script, const fs::path& out) {
    // A gnuplot that is missing (or dies) closes the pipe while we write: the
    // write must fail quietly, not kill this process with SIGPIPE.
    struct sigaction ignore {}, previous {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &previous);
    FILE* gp = ::popen("gnuplot 2>&1", "w");
    if (gp) std::fputs(script.c_str(), gp);
    const int status = gp ? ::pclose(gp) : -1;
    ::sigaction(SIGPIPE, &previous, nullptr);
    LEVERS_CHECK(gp != nullptr, "cannot start gnuplot");
    LEVERS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 127,
                 "drawing takes gnuplot, which is not installed: apt-get install gnuplot-nox");
    LEVERS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && fs::exists(out),
                 "gnuplot could not draw {} (its messages are above)", out.string());
}

std::string gnuplot_quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

namespace {

class PlotCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* plot = command_ = app.add_subcommand("plot", "Draw loss and evaluation curves of runs (or a sweep's "
                                                           "cells) to a PNG");
        plot->add_option("runs", dirs_, "run directories, or a sweep's directory")->required();
        plot->add_option("--out", out_, "the PNG (default: plot.png in the first directory)");
        plot->add_option("--metric", metric_, "draw this metric of every step (metrics.jsonl: reward, kl, "
                                              "rewards/margins, ...) instead of the loss and evaluation");
        plot->footer(ex("\nExamples:\n  {recipe} plot runs/{pretrain}/latest\n"
                        "  {recipe} plot runs/{classify}/sweep-latest --out sweep.png\n"
                        "  {recipe} plot runs/grpo/latest --metric reward"));
    }
    int run(int, char**) override {
        const std::vector<fs::path> dirs(dirs_.begin(), dirs_.end());
        const fs::path out = out_.empty() ? dirs.front() / "plot.png" : fs::path(out_);
        plot_runs(dirs, out, metric_);
        fmt::print("wrote {}\n", out.string());
        return 0;
    }

private:
    std::vector<std::string> dirs_;
    std::string out_, metric_;
};

}  // namespace

std::unique_ptr<Command> plot_command() { return std::make_unique<PlotCommand>(); }

}  // namespace levers

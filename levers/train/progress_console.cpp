#include "levers/train/progress_console.hpp"

#include "levers/core/clock.hpp"
#include "levers/distributed/context.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

namespace levers::train {

ProgressConsole::ProgressConsole(LiveProgress mode) : mode_(dist::is_main() ? mode : LiveProgress::off) {}

void ProgressConsole::line(const std::string& text) {
    if (!dist::is_main()) return;
    fmt::print("{}{}\n", mode_ == LiveProgress::terminal ? "\r\x1b[K" : "", text);
    std::fflush(stdout);
}

bool ProgressConsole::due() const {
    return mode_ != LiveProgress::off && std::chrono::duration<double>(Clock::now() - last_).count() >= 0.25;
}

void ProgressConsole::redraw(const std::string& text) {
    last_ = Clock::now();
    if (mode_ == LiveProgress::terminal)
        fmt::print("\r\x1b[K{}", text);
    else
        fmt::print("{}{}\n", kProgressMark, text);
    std::fflush(stdout);
}

std::string eval_line(long step, const std::map<std::string, double>& metrics) {
    std::string line = fmt::format("eval step {:>5}", step);
    for (const auto& [name, value] : metrics) line += fmt::format(" | {} {:.4f}", name, value);
    return line;
}

std::string duration_text(double seconds) {
    const long t = std::lround(seconds);
    return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

}  // namespace levers::train

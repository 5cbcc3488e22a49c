// Copies everything this process writes to stdout and stderr into a log file
// as well, for as long as the object lives: the rank's log in its run
// directory holds exactly what the console showed, library output included.
#pragma once

#include <filesystem>
#include <thread>

namespace levers {

// Whether stdout was a terminal before any OutputTee (a progress line is
// redrawn in place only there).
bool console_is_terminal();

class OutputTee {
public:
    // Appends to `log`; throws levers::Error naming it if it cannot be opened.
    explicit OutputTee(const std::filesystem::path& log);
    ~OutputTee();  // restores stdout and stderr after copying what is still in flight
    OutputTee(const OutputTee&) = delete;
    OutputTee& operator=(const OutputTee&) = delete;

private:
    int log_fd_ = -1, saved_out_ = -1, saved_err_ = -1;
    int out_read_ = -1, err_read_ = -1;
    std::thread copier_;
};

}  // namespace levers

// The one error type of levers and the one check macro.
//
// LEVERS_CHECK(cond, "fmt {}", args...) throws levers::Error carrying file:line
// and a message meant for the user: say what was wrong and what would be valid.
#pragma once

#include <fmt/core.h>  // fmt::format; format.h (join, chrono, ...) where a file needs more

#include <stdexcept>
#include <string>

namespace levers {

class Error : public std::runtime_error {
public:
    // what() is "where: message"; message() alone is for lines a user reads
    // about their own input, where the source location would be noise.
    Error(const std::string& where, const std::string& message)
        : std::runtime_error(where.empty() ? message : where + ": " + message), where_(where), message_(message) {}
    const std::string& message() const { return message_; }
    const std::string& where() const { return where_; }  // "levers/train/loop.cpp:92", for logs

private:
    std::string where_, message_;
};

// Builds the message "file:line: text" and throws. Out of line keeps call sites small.
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace levers

#define LEVERS_CHECK(cond, ...)                                                  \
    do {                                                                         \
        if (!(cond)) [[unlikely]]                                                \
            ::levers::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    } while (0)

#define LEVERS_FAIL(...) ::levers::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))

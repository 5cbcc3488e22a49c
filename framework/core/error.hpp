// The one error type of levers and the one check macro.
//
// LEVERS_CHECK(cond, "fmt {}", args...) throws levers::Error carrying file:line
// and a message meant for the user: say what was wrong and what would be valid.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace levers {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
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

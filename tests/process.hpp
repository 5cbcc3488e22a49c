// Running the real `recipe` binary (and the tests' own recipe binary) from
// the tests: to its end (run_program, run_recipe) or in the background
// (start_program, start_recipe: its pid, its output in a file, the processes
// it started). The one subprocess helper of the tests.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace levers::testing {

// The last non-empty line of a program's output (where `recipe run` puts its JSON result).
inline std::string last_line(const std::string& out) {
    const auto end = out.find_last_not_of('\n');
    if (end == std::string::npos) return "";
    const auto start = out.rfind('\n', end);
    return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

struct Background {
    pid_t pid = -1;
    std::filesystem::path log;

    // Exit status (as from waitpid) if it ended within `limit`.
    std::optional<int> wait(std::chrono::milliseconds limit) const {
        const auto until = std::chrono::steady_clock::now() + limit;
        do {
            int status = 0;
            if (waitpid(pid, &status, WNOHANG) == pid) return status;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        } while (std::chrono::steady_clock::now() < until);
        return std::nullopt;
    }
    std::string output() const {
        std::ifstream in(log);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
};

// Runs `recipe args...` with stdout and stderr into a temporary file, with
// `env` ("NAME=value") added to its environment.
inline Background start_program(const char* bin, const std::vector<std::string>& args,
                                const std::vector<std::string>& env = {}) {
    Background b;
    b.log = std::filesystem::temp_directory_path() / ("levers-test-" + std::to_string(getpid()) + "-" +
                                                      std::to_string(std::rand()) + ".log");
    b.pid = fork();
    if (b.pid == 0) {
        FILE* f = std::fopen(b.log.c_str(), "w");
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
        std::fclose(f);
        for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(bin));
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(bin, argv.data());
        _exit(127);
    }
    return b;
}

// The `recipe` binary under test.
inline Background start_recipe(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return start_program(std::getenv("LEVERS_RECIPE_BIN"), args, env);
}

// A program run to its end: its exit code (128 + the signal if one killed
// it) and its stdout and stderr together.
struct Ran {
    int code = -1;
    std::string output;
    std::string last_line() const { return testing::last_line(output); }
};

// Runs `bin args...` (with `env` added) to its end; a run past `limit` is
// killed and fails the test. The limit only catches a hung program.
inline Ran run_program(const char* bin, const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                       std::chrono::seconds limit = std::chrono::seconds(300)) {
    REQUIRE_MESSAGE(bin != nullptr, "the program's variable (LEVERS_RECIPE_BIN, ...) is not set");
    Background b = start_program(bin, args, env);
    const auto status = b.wait(limit);
    if (!status) {
        ::kill(b.pid, SIGKILL);
        ::waitpid(b.pid, nullptr, 0);
    }
    Ran r{-1, b.output()};
    std::filesystem::remove(b.log);
    REQUIRE_MESSAGE(status.has_value(), "still running after ", limit.count(), " s: ", bin, "; output:\n", r.output);
    r.code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    return r;
}

inline Ran run_recipe(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                      std::chrono::seconds limit = std::chrono::seconds(300)) {
    return run_program(std::getenv("LEVERS_RECIPE_BIN"), args, env, limit);
}

// "run pretrain --set steps=3" as its words (the tests' command lines quote nothing).
inline std::vector<std::string> words(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// The GPT the tests train (pretrain's parameters): one layer of 16, context
// 16, batch 2, so that a step takes milliseconds.
inline const std::vector<std::string> kTinyGpt = {"--set", "n_layer=1",     "--set", "n_embd=16",
                                                  "--set", "n_head=2",      "--set", "block_size=16",
                                                  "--set", "batch_size=2",  "--set", "eval_batches=2"};

inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Processes whose parent is `parent`, from /proc.
inline std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(e.path() / "stat");
        std::string line;
        std::getline(stat, line);
        auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(line.substr(close + 2));
        char state;
        pid_t ppid;
        rest >> state >> ppid;
        if (ppid == parent && state != 'Z') out.push_back(std::stoi(name));
    }
    return out;
}

inline bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// Segments in /dev/shm named after launcher `pid`.
inline std::vector<std::string> segments_of(pid_t pid) {
    std::vector<std::string> out;
    const std::string prefix = "levers-" + std::to_string(pid) + "-";
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
        if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path().filename().string());
    return out;
}

}  // namespace levers::testing

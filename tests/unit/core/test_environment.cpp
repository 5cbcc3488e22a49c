// The environment's one reader and its manual (levers/core/environment.hpp).
#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

using namespace levers;
namespace fs = std::filesystem;

TEST_CASE("env::get reads declared variables only; empty counts as unset but where kept") {
    ::setenv("LEVERS_CPU_SLOTS", "", 1);
    CHECK(env::get("LEVERS_CPU_SLOTS") == nullptr);
    CHECK(std::string(env::get_even_empty("LEVERS_CPU_SLOTS")) == "");
    ::setenv("LEVERS_CPU_SLOTS", "3", 1);
    CHECK(std::string(env::get("LEVERS_CPU_SLOTS")) == "3");
    ::unsetenv("LEVERS_CPU_SLOTS");
    CHECK(env::get_even_empty("LEVERS_CPU_SLOTS") == nullptr);
    CHECK_THROWS_WITH_AS(env::get("LEVERS_NOT_A_THING"),
                         doctest::Contains("LEVERS_NOT_A_THING is read but not declared in levers/core/environment.hpp"),
                         Error);
    CHECK(env::manual().find("  LEVERS_FUSED_ATTENTION") != std::string::npos);
}

// Every variable levers' code reads goes through env::get, with a declared
// name: a new getenv elsewhere, or a name missing from the manual, fails here.
TEST_CASE("no source file reads the environment but through env::get, and every name it reads is declared") {
    const char* root = std::getenv("LEVERS_SOURCE_ROOT");
    REQUIRE_MESSAGE(root != nullptr, "LEVERS_SOURCE_ROOT must name the source tree (meson test sets it)");
    const std::regex read_by_name(R"re(env::get(?:_even_empty)?\("([A-Z0-9_]+)"\))re");
    int files = 0, reads = 0;
    for (const char* layer : {"levers", "recipes"}) {
        for (const auto& e : fs::recursive_directory_iterator(fs::path(root) / layer)) {
            const auto ext = e.path().extension();
            if (ext != ".cpp" && ext != ".hpp" && ext != ".cu") continue;
            std::ifstream in(e.path());
            std::stringstream text;
            text << in.rdbuf();
            const std::string src = text.str();
            ++files;
            const std::string name = fs::relative(e.path(), root).string();
            CAPTURE(name);
            if (name != "levers/core/environment.cpp") CHECK(src.find("getenv(") == std::string::npos);
            for (std::sregex_iterator m(src.begin(), src.end(), read_by_name), end; m != end; ++m) {
                ++reads;
                const std::string var = (*m)[1];
                CAPTURE(var);
                CHECK_NOTHROW(env::get(var));
            }
        }
    }
    CHECK(files > 100);
    CHECK(reads > 20);
}

#include "framework/core/error.hpp"
#include "framework/recipe/recipe.hpp"

#include <doctest/doctest.h>

using namespace levers;

namespace {
Plan sample() {
    return recipe("sample")
        .describe("for tests")
        .param("steps", 10, "steps")
        .param("lr", 3e-4, "learning rate")
        .param("name", "x", "a string")
        .param("fast", false, "a bool")
        .param("widths", {64, 32}, "a list")
        .param("rates", {1e-3, 3e-3}, "a float list")
        .run([](const Config& c) { return Result{{"steps", c.get<long>("steps")}}; });
}
}  // namespace

TEST_CASE("parameters keep their declared types through the command line's text") {
    Config c = sample().defaults();
    c.set("steps", "25");
    c.set("lr", "1e-3");
    c.set("name", "hello world");
    c.set("fast", "true");
    c.set("widths", "8,4,2");
    c.set("rates", "0.5,2e-4");
    CHECK(c.get<long>("steps") == 25);
    CHECK(c.get<int>("steps") == 25);
    CHECK(c.get<double>("lr") == 1e-3);
    CHECK(c.get<std::string>("name") == "hello world");
    CHECK(c.get<bool>("fast"));
    CHECK(c.get<std::vector<long>>("widths") == std::vector<long>{8, 4, 2});
    CHECK(c.get<std::vector<double>>("rates") == std::vector<double>{0.5, 2e-4});
    CHECK(c.to_json()["rates"][1] == 2e-4);
}

TEST_CASE("bad parameter names and values are refused with what would be valid") {
    struct Case {
        const char *name, *value, *message;
    };
    const Case cases[] = {
        {"step", "3", "unknown parameter 'step'; valid parameters: steps, lr, name, fast, widths, rates"},
        {"steps", "3.5", "parameter 'steps': '3.5' is not an integer"},
        {"steps", "", "parameter 'steps': '' is not an integer"},
        {"lr", "fast", "parameter 'lr': 'fast' is not a finite number"},
        {"lr", "inf", "is not a finite number"},
        {"fast", "maybe", "parameter 'fast': 'maybe' is not a bool"},
        {"widths", "8,,2", "is not a comma-separated list of integers"},
        {"rates", "1e-3,x", "is not a comma-separated list of numbers"},
    };
    for (const auto& c : cases) {
        std::string name = c.name;
        CAPTURE(name);
        Config cfg = sample().defaults();
        CHECK_THROWS_WITH_AS(cfg.set(c.name, c.value), doctest::Contains(c.message), Error);
    }
    Config cfg = sample().defaults();
    CHECK_THROWS_WITH_AS(cfg.get<double>("steps"), doctest::Contains("parameter 'steps' is int"), Error);
}

TEST_CASE("the builder refuses duplicate parameters, bad names and a missing body") {
    CHECK_THROWS_WITH_AS(recipe("r").param("a", 1, "").param("a", 2, ""), doctest::Contains("'a' declared twice"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").param("Bad Name", 1, ""), doctest::Contains("parameter name 'Bad Name'"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").build(), doctest::Contains("has no body"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").gpus(0), doctest::Contains("gpus(0) must be >= 1"), Error);
    CHECK(sample().defaults().get<long>("steps") == 10);
    CHECK(sample().run(sample().defaults())["steps"] == 10);
}

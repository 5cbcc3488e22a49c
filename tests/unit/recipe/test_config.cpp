#include "levers/core/error.hpp"
#include "levers/recipe/map_cells.hpp"
#include "levers/recipe/recipe.hpp"

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

TEST_CASE("bounds refuse values out of range when set, and defaults out of range when declared") {
    Plan r = recipe("bounded")
                 .param("steps", 10, "optimizer steps", at_least(1))
                 .param("dropout", 0.1, "drop rate", between(0, 1))
                 .param("widths", {64, 32}, "widths", at_least(1))
                 .run([](const Config&) { return Result{}; });
    Config c = r.defaults();
    CHECK_THROWS_WITH_AS(c.set("steps", "-5"),
                         doctest::Contains("parameter 'steps': -5 is out of range; it must be >= 1 (optimizer steps)"),
                         Error);
    CHECK_THROWS_WITH_AS(c.set("dropout", "1.5"), doctest::Contains("it must be in [0, 1]"), Error);
    CHECK_THROWS_WITH_AS(c.set("widths", "8,0"), doctest::Contains("'widths': 8,0 is out of range"), Error);
    CHECK(c.get<long>("steps") == 10);  // a refused value leaves the old one
    c.set("steps", "1");
    c.set("dropout", "1");
    CHECK(c.get<long>("steps") == 1);
    CHECK(c.get<double>("dropout") == 1.0);
    CHECK_THROWS_WITH_AS(recipe("r").param("n", 0, "count", at_least(1)),
                         doctest::Contains("the default of parameter 'n': 0 is out of range"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").param("name", "x", "a name", at_least(1)),
                         doctest::Contains("parameter 'name' is a string; bounds (>= 1) limit numbers only"), Error);
}

TEST_CASE("check_cells checks each cell on top of the base config and names the first that fails") {
    Plan r = recipe("cells")
                 .param("steps", 10, "optimizer steps", at_least(1))
                 .param("lr", 0.1, "learning rate", at_least(0))
                 .run([](const Config&) { return Result{}; });
    Config base = r.defaults();
    base.set("lr", "0.5");
    CHECK_NOTHROW(check_cells(r, base, {{{"steps", "3"}}, {{"lr", "0"}}}));
    CHECK_THROWS_WITH_AS(check_cells(r, base, {{{"steps", "3"}}, {{"steps", "0"}}}),
                         doctest::Contains("cell 1: parameter 'steps': 0 is out of range"), Error);
    CHECK_THROWS_WITH_AS(check_cells(r, base, {{{"stepz", "3"}}}), doctest::Contains("cell 0: unknown parameter 'stepz'"),
                         Error);
}

TEST_CASE("a parameter's default keeps its kind: integers, floating point, text, bool, lists") {
    const std::string text = "words";
    Plan r = recipe("kinds")
                 .param("small", short{3}, "an integer of another width")
                 .param("count", std::size_t{7}, "an unsigned count")
                 .param("rate", 0.5f, "a float")
                 .param("label", text, "a std::string")
                 .param("path", "a.txt", "a literal")
                 .param("on", true, "a flag")
                 .param("sizes", {1, 2}, "ints")
                 .param("rates", {0.1, 0.2}, "floats")
                 .run([](const Config&) { return Result{}; });
    const Config c = r.defaults();
    CHECK(c.get<long>("small") == 3);
    CHECK(c.get<long>("count") == 7);
    CHECK(c.get<double>("rate") == 0.5);
    CHECK(c.get<std::string>("label") == "words");
    CHECK(c.get<std::string>("path") == "a.txt");
    CHECK(c.get<bool>("on"));
    CHECK(c.get<std::vector<long>>("sizes") == std::vector<long>{1, 2});
    CHECK(c.get<std::vector<double>>("rates") == std::vector<double>{0.1, 0.2});
}

TEST_CASE("a recipe's check and the framework loop's settings are applied before a run") {
    bool ran = false;
    Plan r = recipe("checked")
                 .param("path", "", "a file")
                 .check([](const Config& c) { LEVERS_CHECK(!c.get<std::string>("path").empty(), "give --set path="); })
                 .run([&](const Config&) {
                     ran = true;
                     return Result{};
                 });
    CHECK_THROWS_WITH_AS(r.check(r.defaults()), doctest::Contains("give --set path="), Error);
    Config c = r.defaults();
    c.set("path", "x");
    r.check(c);
    CHECK_FALSE(ran);
}

TEST_CASE("lists of counts on the command line refuse empty and bad items, naming the item") {
    CHECK(parse_int_list("--gpus", "1,2,4", 1) == std::vector<int>{1, 2, 4});
    CHECK(parse_int_list("LEVERS_GPUS", "0", 0) == std::vector<int>{0});
    CHECK_THROWS_WITH_AS(parse_int_list("--gpus", "1,,2", 1),
                         doctest::Contains("--gpus '1,,2': item 2 (empty) is not an integer >= 1; give them separated "
                                           "by commas (e.g. 1,2,4)"),
                         Error);
    CHECK_THROWS_WITH_AS(parse_int_list("--gpus", "2,", 1), doctest::Contains("item 2 (empty)"), Error);
    CHECK_THROWS_WITH_AS(parse_int_list("--gpus", "0", 1), doctest::Contains("item 1 ('0')"), Error);
    CHECK_THROWS_WITH_AS(parse_int_list("--gpus", "1,x", 1), doctest::Contains("item 2 ('x')"), Error);
    CHECK_THROWS_WITH_AS(parse_int_list("--gpus", "", 1), doctest::Contains("item 1 (empty)"), Error);
}

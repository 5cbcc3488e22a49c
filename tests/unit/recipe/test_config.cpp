#include "levers/core/error.hpp"
#include "levers/recipe/map_cells.hpp"
#include "levers/recipe/recipe.hpp"

#include <doctest/doctest.h>

using namespace levers;

namespace {
const Param<long> steps{"steps", 10, "steps"};
const Param<double> lr{"lr", 3e-4, "learning rate"};
const Param<std::string> name{"name", "x", "a string"};
const Param<bool> fast{"fast", false, "a bool"};
const Param<std::vector<long>> widths{"widths", {64, 32}, "a list"};
const Param<std::vector<double>> rates{"rates", {1e-3, 3e-3}, "a float list"};

Recipe sample() {
    return recipe("sample")
        .describe("for tests")
        .params(steps, lr, name, fast, widths, rates)
        .run([](const Config& c) { return Result{{"steps", c[steps]}}; });
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
    CHECK(c[steps] == 25);
    const Param<int> steps_as_int{"steps", 0, "the same parameter read as int"};
    CHECK(c[steps_as_int] == 25);
    CHECK(c[lr] == 1e-3);
    CHECK(c[name] == "hello world");
    CHECK(c[fast]);
    CHECK(c[widths] == std::vector<long>{8, 4, 2});
    CHECK(c[rates] == std::vector<double>{0.5, 2e-4});
    CHECK(std::get<long>(c.value("steps")) == 25);
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
    const Param<double> steps_as_float{"steps", 0, "read as another type"};
    CHECK_THROWS_WITH_AS(cfg[steps_as_float], doctest::Contains("parameter 'steps' is declared as int"), Error);
}

TEST_CASE("the builder refuses duplicate parameters, bad names and a missing body") {
    const Param<int> a{"a", 1, ""}, b{"a", 2, ""};
    CHECK_THROWS_WITH_AS(recipe("r").params(a, b), doctest::Contains("'a' declared twice"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").params(Param<int>{"Bad Name", 1, ""}), doctest::Contains("parameter name 'Bad Name'"),
                         Error);
    CHECK_THROWS_WITH_AS(recipe("r").build(), doctest::Contains("has no body"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").gpus(0), doctest::Contains("gpus(0) must be >= 1"), Error);
    CHECK(sample().defaults()[steps] == 10);
    CHECK(sample().run(sample().defaults())["steps"] == 10);
}

TEST_CASE("bounds refuse values out of range when set, and defaults out of range when declared") {
    const Param<long> bounded_steps{"steps", 10, "optimizer steps", at_least(1)};
    const Param<double> dropout{"dropout", 0.1, "drop rate", between(0, 1)};
    Recipe r = recipe("bounded")
                 .params(bounded_steps, dropout, Param<std::vector<int>>{"widths", {64, 32}, "widths", at_least(1)})
                 .run([](const Config&) { return Result{}; });
    Config c = r.defaults();
    CHECK_THROWS_WITH_AS(c.set("steps", "-5"),
                         doctest::Contains("parameter 'steps': -5 is out of range; it must be >= 1 (optimizer steps)"),
                         Error);
    CHECK_THROWS_WITH_AS(c.set("dropout", "1.5"), doctest::Contains("it must be in [0, 1]"), Error);
    CHECK_THROWS_WITH_AS(c.set("widths", "8,0"), doctest::Contains("'widths': 8,0 is out of range"), Error);
    CHECK(c[bounded_steps] == 10);  // a refused value leaves the old one
    c.set("steps", "1");
    c.set("dropout", "1");
    CHECK(c[bounded_steps] == 1);
    CHECK(c[dropout] == 1.0);
    CHECK_THROWS_WITH_AS(recipe("r").params(Param<int>{"n", 0, "count", at_least(1)}),
                         doctest::Contains("the default of parameter 'n': 0 is out of range"), Error);
    CHECK_THROWS_WITH_AS(recipe("r").params(Param<std::string>{"name", "x", "a name", at_least(1)}),
                         doctest::Contains("parameter 'name' is a string; bounds (>= 1) limit numbers only"), Error);
}

TEST_CASE("check_cells checks each cell on top of the base config and names the first that fails") {
    Recipe r = recipe("cells")
                 .params(Param<long>{"steps", 10, "optimizer steps", at_least(1)},
                         Param<double>{"lr", 0.1, "learning rate", at_least(0)})
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
    const Param<short> small{"small", 3, "an integer of another width"};
    const Param<std::size_t> count{"count", 7, "an unsigned count"};
    const Param<float> rate{"rate", 0.5f, "a float"};
    const Param<std::string> label{"label", text, "a std::string"};
    const Param path{"path", "a.txt", "a literal"};
    const Param<bool> on{"on", true, "a flag"};
    const Param<std::vector<int>> sizes{"sizes", {1, 2}, "ints"};
    const Param<std::vector<float>> fractions{"fractions", {0.5f, 0.25f}, "floats"};
    Recipe r = recipe("kinds").params(small, count, rate, label, path, on, sizes, fractions).run([](const Config&) {
        return Result{};
    });
    const Config c = r.defaults();
    CHECK(c[small] == 3);
    CHECK(c[count] == 7);
    CHECK(c[rate] == 0.5f);
    CHECK(c[label] == "words");
    CHECK(c[path] == "a.txt");
    CHECK(c[on]);
    CHECK(c[sizes] == std::vector<int>{1, 2});
    CHECK(c[fractions] == std::vector<float>{0.5f, 0.25f});
    // As the command line and config.json see them: integers, floating point, text, bool, lists.
    CHECK(type_name(c.value("small")) == "int");
    CHECK(type_name(c.value("count")) == "int");
    CHECK(type_name(c.value("rate")) == "float");
    CHECK(type_name(c.value("path")) == "string");
    CHECK(type_name(c.value("sizes")) == "int list");
    CHECK(type_name(c.value("fractions")) == "float list");
    // An unsigned count refuses a negative value where it is read.
    Config negative = c;
    negative.set("count", "-1");
    CHECK_THROWS_WITH_AS(negative[count], doctest::Contains("parameter 'count': -1 does not fit"), Error);
}

TEST_CASE("a recipe's check and the framework loop's settings are applied before a run") {
    bool ran = false;
    static const Param<std::string> path{"path", "", "a file"};
    Recipe r = recipe("checked")
                 .params(path)
                 .check([](const Config& c) { LEVERS_CHECK(!c[path].empty(), "give --set path="); })
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

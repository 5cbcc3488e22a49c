// The user's own project (examples/user_project), built against levers as a
// user builds it: its small recipes train in a few lines each, on one rank
// and two, and its own ops work (one written with tensors, one with a kernel).
#include "examples/user_project/user_ops.hpp"
#include "levers/core/dispatch.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

using namespace levers;
using namespace levers::testing;

namespace {
Ran run_user(const std::string& line) { return run_program(std::getenv("LEVERS_USER_RECIPES_BIN"), words(line)); }
}  // namespace

TEST_CASE("the user's regression (MSE) finds the line, on one rank and two") {
    for (const char* gpus : {"1", "2"}) {
        CAPTURE(gpus);
        const Ran r = run_user(std::string("run regression --threads 1 --gpus ") + gpus);
        REQUIRE_MESSAGE(r.code == 0, r.output);
        const auto result = nlohmann::json::parse(r.last_line());
        CHECK(result["slope"].get<double>() == doctest::Approx(3).epsilon(0.03));
        CHECK(result["intercept"].get<double>() == doctest::Approx(-1).epsilon(0.03));
    }
}

TEST_CASE("the user's logistic classifier (sigmoid, BCE, the user's own activation) tells the circle apart") {
    const Ran r = run_user("run logistic --threads 1");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK(nlohmann::json::parse(r.last_line())["train_accuracy"].get<double>() > 0.9);
}

TEST_CASE("a user's op with a kernel of its own: gradients through its Function, refused by name where it has no kernel") {
    Tensor x = Tensor::from(std::vector<double>{-1.5, 0.5, 2}, {3}).requires_grad_();
    const auto report = nn::check_gradients([&] { return user::cube(x); }, {x});
    INFO(report.str());
    CHECK(report.passed);
    CHECK(user::cube(x.detach()).values() == std::vector<double>{-3.375, 0.125, 8});
    CHECK(has_kernel("user_cube", Device::Kind::cpu, DType::f32));
    CHECK_FALSE(has_kernel("user_cube", Device::Kind::cpu, DType::i32));
}

TEST_CASE("the documentation's complete example (docs/examples/fashion_cnn.cpp) learns, the same on 1 and 2 ranks" *
          needs({Data::fashion_mnist})) {
    std::vector<nlohmann::json> results;
    for (const char* gpus : {"1", "2"}) {
        CAPTURE(gpus);
        const Ran r = run_program(std::getenv("LEVERS_DOCS_EXAMPLE_BIN"),
                                  words(std::string("run fashion_cnn --threads 1 --set steps=60 --set channels=4 ") +
                                        "--set eval_every=0 --set global_batch=64 --gpus " + gpus));
        REQUIRE_MESSAGE(r.code == 0, r.output);
        results.push_back(nlohmann::json::parse(r.last_line()));
    }
    // Each rank's share of the test images, summed: every image counted once, whatever the rank count (the two
    // runs' weights agree to float rounding, which may tip an image or two).
    CHECK(results[0]["test_accuracy"].get<double>() > 0.5);
    CHECK(std::abs(results[1]["test_accuracy"].get<double>() - results[0]["test_accuracy"].get<double>()) <= 3e-4);
    CHECK(results[1]["loss"].get<double>() == doctest::Approx(results[0]["loss"].get<double>()).epsilon(1e-6));
}

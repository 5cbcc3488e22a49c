// The user's own project (examples/user_project), built against levers as a
// user builds it: its small recipes train in a few lines each, on one rank
// and two, and its own ops work (one written with tensors, one with a kernel).
#include "examples/user_project/user_ops.hpp"
#include "levers/core/dispatch.hpp"
#include "tests/process.hpp"

#include <nlohmann/json.hpp>

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

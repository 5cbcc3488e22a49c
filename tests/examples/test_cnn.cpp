// The user's small CNN (examples/user_project: two convolutions, pooling, a
// linear head) learns Fashion-MNIST to at least 90% on the 10,000 test
// images, on one rank and on two (the same global batch). A suite of its own
// ('examples'): about a minute and a half per run on two cores.
#include "tests/installed_data.hpp"
#include "tests/process.hpp"

#include <nlohmann/json.hpp>

using namespace levers::testing;

TEST_CASE("a small CNN of the user's learns Fashion-MNIST to 90%, on one rank and two" *
          needs({Data::fashion_mnist})) {
    for (const auto& [gpus, batch] : {std::pair<std::string, std::string>{"1", "64"}, {"2", "32"}}) {
        CAPTURE(gpus);
        const Ran r = run_program(std::getenv("LEVERS_USER_RECIPES_BIN"),
                                  words("run fashion_cnn --gpus " + gpus + " --set batch_size=" + batch),
                                  {}, std::chrono::seconds(900));
        REQUIRE_MESSAGE(r.code == 0, r.output);
        const auto result = nlohmann::json::parse(r.last_line());
        MESSAGE(gpus << " rank(s): final test accuracy " << result["final_test_accuracy"].get<double>());
        CHECK(result["final_test_accuracy"].get<double>() >= 0.90);
    }
}

// A user's own recipe binary: `./my_recipes run line --gpus 2` and every other
// `recipe` command, for the recipes defined here.
#include "framework/core/rng.hpp"
#include "framework/dist/context.hpp"
#include "framework/recipe/cli.hpp"
#include "framework/recipe/recipe.hpp"
#include "models/mlp.hpp"

using namespace levers;
using Mlp = models::Mlp<float>;

// Points on either side of the line y = x; the model learns which side.
struct Points {
    std::vector<float> xy;
    std::vector<std::int32_t> side;
};

Points make_points(const Config& cfg) {
    Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")) + dist::rank());  // each rank its own points
    Points p;
    for (long i = 0; i < cfg.get<long>("batch_size"); ++i) {
        const float x = static_cast<float>(rng.uniform()), y = static_cast<float>(rng.uniform());
        p.xy.insert(p.xy.end(), {x, y});
        p.side.push_back(y > x);
    }
    return p;
}

LEVERS_RECIPE(line) {
    return recipe("line")
        .describe("an MLP learns which side of a line points fall on")
        .param("steps", 300, "optimizer steps")
        .param("lr", 1e-2, "learning rate")
        .param("batch_size", 256, "points per rank")
        .param("seed", 1, "seed")
        .model([](const Config& cfg) {
            return std::make_unique<Mlp>(models::MlpConfig{.inputs = 2, .hidden = {16}, .classes = 2},
                                         static_cast<std::uint64_t>(cfg.get<long>("seed")));
        })
        .data(make_points)
        .step([](Mlp& m, Points& p, const StepInfo&) {
            const float loss = m.forward(p.xy.data(), p.side.data(), static_cast<std::int64_t>(p.side.size()));
            m.backward();
            return MicroResult{loss, static_cast<long>(p.side.size())};
        });
}

int main(int argc, char** argv) { return levers::main(argc, argv); }

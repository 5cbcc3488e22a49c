// lora_sweep: a grid of fine_tune cells over adapter rank and learning rate,
// each a one-GPU job of its own, as many at once as GPUs allow. Shows
// Recipe::map, the C++ side of `recipe sweep`.
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace levers_recipe_lora_sweep {

namespace {

using namespace levers;
namespace s = settings;

const Param<std::vector<int>> ranks{"lora_r", {2, 8}, "adapter ranks to try", at_least(1)};
const Param<std::vector<double>> rates{"lr", {1e-3, 3e-3}, "peak learning rates to try", at_least(0)};
const Param<std::string> base{"base", "runs/pretrain/latest/model.ckpt", "the pretrained model every cell starts from"};

// Each cell a fine_tune run, its settings named by fine_tune's handles (settings.hpp).
Result lora_sweep(const Config& cfg) {
    const std::string from = std::filesystem::absolute(cfg[base]).string();
    std::vector<std::map<std::string, std::string>> cells;
    for (int r : cfg[ranks])
        for (double lr : cfg[rates]) cells.push_back({{s::lora_r.name(), std::to_string(r)}, {s::lr.name(), fmt::format("{}", lr)}});
    const long steps = cfg[s::steps];
    const std::map<std::string, std::string> every_cell = {{base.name(), from},
                                                           {s::steps.name(), std::to_string(steps)},
                                                           {s::batch_size.name(), std::to_string(cfg[s::batch_size])},
                                                           {s::seed.name(), std::to_string(cfg[s::seed])},
                                                           {s::eval_every.name(), std::to_string(steps)}};
    const auto results = find_recipe("fine_tune").map(cfg.run(), cells, every_cell);

    // The best cell by validation loss is the sweep's answer.
    std::size_t best = results.size();
    for (std::size_t i = 0; i < results.size(); ++i)
        if (results[i]["status"] == "ok" &&
            (best == results.size() || results[i]["val_loss"] < results[best]["val_loss"]))
            best = i;
    LEVERS_CHECK(best < results.size(), "every fine_tune cell failed; see the logs named above");
    dist::print0("best: lora_r={} lr={} val_loss {:.4f} (from {:.4f})\n", cells[best][s::lora_r.name()],
                 cells[best][s::lr.name()],
                 results[best]["val_loss"].get<double>(), results[best]["val_loss_at_start"].get<double>());
    Result cells_out = Result::array();
    for (std::size_t i = 0; i < results.size(); ++i) {
        Result c = results[i];
        c["lora_r"] = std::stol(cells[i][s::lora_r.name()]);
        c["lr"] = std::stod(cells[i][s::lr.name()]);
        cells_out.push_back(std::move(c));
    }
    return {{"loss", results[best]["loss"]},
            {"steps", results[best]["steps"]},
            {"val_loss", results[best]["val_loss"]},
            {"best", {{"lora_r", std::stol(cells[best][s::lora_r.name()])}, {"lr", std::stod(cells[best][s::lr.name()])}}},
            {"cells", cells_out}};
}

}  // namespace

LEVERS_RECIPE(lora_sweep) {
    return levers::recipe("lora_sweep")
        .describe("fine_tune cells over a grid of LoRA rank and learning rate, side by side; returns the best")
        .params(ranks, rates, s::steps.with_default(200), s::batch_size.with_default(16), s::seed.with_default(1337),
                base)
        .run(lora_sweep);
}

}  // namespace levers_recipe_lora_sweep

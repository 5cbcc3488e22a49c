// lora_sweep: a grid of fine_tune cells over adapter rank and learning rate,
// each a one-GPU job of its own, as many at once as GPUs allow. Shows
// Plan::map, the C++ side of `recipe sweep`.
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace {

using namespace levers;

Result lora_sweep(const Config& cfg) {
    const std::string base = std::filesystem::absolute(cfg.get<std::string>("base")).string();
    std::vector<std::map<std::string, std::string>> cells;
    for (long r : cfg.get<std::vector<long>>("lora_r"))
        for (double lr : cfg.get<std::vector<double>>("lr"))
            cells.push_back({{"lora_r", std::to_string(r)}, {"lr", fmt::format("{}", lr)}});
    const std::map<std::string, std::string> every_cell = {{"base", base},
                                                           {"steps", std::to_string(cfg.get<long>("steps"))},
                                                           {"batch_size", std::to_string(cfg.get<long>("batch_size"))},
                                                           {"seed", std::to_string(cfg.get<long>("seed"))},
                                                           {"eval_every", std::to_string(cfg.get<long>("steps"))}};
    const auto results = find_recipe("fine_tune").map(cfg.run(), cells, every_cell);

    // The best cell by validation loss is the sweep's answer.
    std::size_t best = results.size();
    for (std::size_t i = 0; i < results.size(); ++i)
        if (results[i]["status"] == "ok" &&
            (best == results.size() || results[i]["val_loss"] < results[best]["val_loss"]))
            best = i;
    LEVERS_CHECK(best < results.size(), "every fine_tune cell failed; see the logs named above");
    dist::print0("best: lora_r={} lr={} val_loss {:.4f} (from {:.4f})\n", cells[best]["lora_r"], cells[best]["lr"],
                 results[best]["val_loss"].get<double>(), results[best]["val_loss_at_start"].get<double>());
    Result cells_out = Result::array();
    for (std::size_t i = 0; i < results.size(); ++i) {
        Result c = results[i];
        c["lora_r"] = std::stol(cells[i]["lora_r"]);
        c["lr"] = std::stod(cells[i]["lr"]);
        cells_out.push_back(std::move(c));
    }
    return {{"loss", results[best]["loss"]},
            {"steps", results[best]["steps"]},
            {"val_loss", results[best]["val_loss"]},
            {"best", {{"lora_r", std::stol(cells[best]["lora_r"])}, {"lr", std::stod(cells[best]["lr"])}}},
            {"cells", cells_out}};
}

}  // namespace

LEVERS_RECIPE(lora_sweep) {
    return levers::recipe("lora_sweep")
        .describe("fine_tune cells over a grid of LoRA rank and learning rate, side by side; returns the best")
        .param("lora_r", {2, 8}, "adapter ranks to try", at_least(1))
        .param("lr", {1e-3, 3e-3}, "peak learning rates to try", at_least(0))
        .param("steps", 200, "optimizer steps of each cell", at_least(1))
        .param("batch_size", 16, "sequences per step of each cell", at_least(1))
        .param("seed", 1337, "each cell's seed")
        .param("base", "runs/pretrain/latest/model.ckpt", "the pretrained model every cell starts from")
        .run(lora_sweep);
}

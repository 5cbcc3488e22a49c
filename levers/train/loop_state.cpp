#include "levers/train/loop_state.hpp"

#include <nlohmann/json.hpp>

#include "levers/core/error.hpp"

namespace levers::train {

nlohmann::json to_json(const LoopState& s) {
    return {{"step", s.step},
            {"items", s.items},
            {"window_loss", s.window_loss},
            {"window_steps", s.window_steps},
            {"last_loss", s.last_loss},
            {"have_best", s.have_best},
            {"best_metric", s.best_metric},
            {"best_step", s.best_step},
            {"evals_without_gain", s.evals_without_gain},
            {"train_seconds", s.train_seconds}};
}

LoopState loop_state_from_json(const nlohmann::json& j, const std::string& file) {
    try {
        LoopState s;
        s.step = j.at("step").get<long>();
        s.items = j.at("items").get<std::int64_t>();
        s.window_loss = j.at("window_loss").get<double>();
        s.window_steps = j.at("window_steps").get<long>();
        s.last_loss = j.value("last_loss", 0.0);  // absent from checkpoints written before it was kept
        s.have_best = j.at("have_best").get<bool>();
        s.best_metric = j.at("best_metric").get<double>();
        s.best_step = j.at("best_step").get<long>();
        s.evals_without_gain = j.at("evals_without_gain").get<long>();
        s.train_seconds = j.at("train_seconds").get<double>();
        return s;
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: the training loop's state in the metadata is incomplete: {}", file, e.what());
    }
}

}  // namespace levers::train

#include "levers/app/run_config.hpp"

#include "levers/core/error.hpp"
#include "levers/recipe/run_dir.hpp"
#include "levers/train/train_state.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>

namespace levers {

namespace fs = std::filesystem;

Config apply_sets(Config cfg, const std::vector<std::string>& sets) {
    for (const auto& kv : sets) {
        auto eq = kv.find('=');
        LEVERS_CHECK(eq != std::string::npos && eq > 0, "--set expects name=value, got '{}'", kv);
        cfg.set(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return cfg;
}

Config resolve_config(const Recipe& r, const std::vector<std::string>& sets) { return apply_sets(r.defaults(), sets); }

Config resumed_config(const Recipe& r, const fs::path& checkpoint, const std::vector<std::string>& sets) {
    const auto state = train::read_train_state(checkpoint);
    Config cfg = r.defaults();
    const nlohmann::json saved = state.file.metadata.value("config", nlohmann::json::object());
    for (const auto& [name, value] : saved.items()) {
        if (!cfg.has(name)) continue;  // a parameter the recipe no longer declares
        std::string text;
        if (value.is_string()) {
            text = value.get<std::string>();
        } else if (value.is_array()) {
            for (const auto& x : value) {
                if (!text.empty()) text += ',';
                text += x.dump();
            }
        } else {
            text = value.dump();
        }
        cfg.set(name, text);
    }
    return apply_sets(std::move(cfg), sets);
}

void write_config(const fs::path& dir, const Recipe& r, const Config& cfg, int ranks, int argc, char** argv) {
    nlohmann::json j = {{"recipe", r.name()},
                        {"params", cfg.to_json()},
                        {"ranks", ranks},
                        {"command", std::vector<std::string>(argv, argv + argc)},
                        {"started", fmt::format("{:%Y-%m-%dT%H:%M:%S%z}", fmt::localtime(std::time(nullptr)))}};
    if (!cfg.run().resume.empty()) j["resumed_from"] = cfg.run().resume.string();
    write_json_file(dir / "config.json", j);
}

std::string result_text(const Result& result) {
    return result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace levers

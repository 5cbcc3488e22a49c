// The recipe DSL and registry.
//
//   LEVERS_RECIPE(pretrain) {
//       return levers::recipe("pretrain")
//           .describe("GPT on the book corpus")
//           .param("steps", 600, "optimizer steps")
//           .run(train_gpt);            // Result train_gpt(const levers::Config&)
//   }
//
// Each builder method sets one thing and returns the recipe; validate() checks
// the whole. `recipe list` shows every registered recipe.
#pragma once

#include "framework/recipe/config.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace levers {

// What a recipe returns: one JSON object, printed as the last line of `recipe run`.
using Result = nlohmann::json;
using RecipeBody = std::function<Result(const Config&)>;

class Recipe {
public:
    explicit Recipe(std::string name);

    Recipe& describe(std::string text);
    Recipe& gpus(int n);  // the default card count
    Recipe& param(const std::string& name, int default_value, std::string help);
    Recipe& param(const std::string& name, long default_value, std::string help);
    Recipe& param(const std::string& name, double default_value, std::string help);
    Recipe& param(const std::string& name, bool default_value, std::string help);
    Recipe& param(const std::string& name, const char* default_value, std::string help);
    Recipe& param(const std::string& name, std::string default_value, std::string help);
    Recipe& param(const std::string& name, std::initializer_list<long> default_value, std::string help);
    Recipe& run(RecipeBody body);  // the recipe owns its loop

    // Throws levers::Error if the recipe has no body or a bad name or default.
    void validate() const;

    const std::string& name() const { return name_; }
    const std::string& description() const { return description_; }
    int default_gpus() const { return gpus_; }
    const std::vector<ParamSpec>& params() const { return params_; }
    Config defaults() const { return Config(params_); }
    const RecipeBody& body() const { return body_; }

private:
    Recipe& add_param(const std::string& name, ParamValue value, std::string help);

    std::string name_, description_;
    int gpus_ = 1;
    std::vector<ParamSpec> params_;
    RecipeBody body_;
};

// Starts a recipe builder.
inline Recipe recipe(std::string name) { return Recipe(std::move(name)); }

// Registry: LEVERS_RECIPE registers a factory at start-up; lookups build it.
bool register_recipe(const std::string& name, Recipe (*factory)());
std::vector<std::string> recipe_names();  // sorted
// Throws levers::Error for an unknown name, suggesting the closest one.
Recipe find_recipe(const std::string& name);

}  // namespace levers

#define LEVERS_RECIPE(id)                                                                         \
    static ::levers::Recipe levers_recipe_factory_##id();                                        \
    [[maybe_unused]] static const bool levers_recipe_registered_##id =                           \
        ::levers::register_recipe(#id, &levers_recipe_factory_##id);                             \
    static ::levers::Recipe levers_recipe_factory_##id()

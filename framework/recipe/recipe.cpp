#include "framework/recipe/recipe.hpp"

#include "framework/core/error.hpp"

#include <algorithm>
#include <map>

namespace levers {

namespace {

std::map<std::string, Recipe (*)()>& factories() {
    static std::map<std::string, Recipe (*)()> registry;
    return registry;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

bool valid_identifier(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

}  // namespace

Recipe::Recipe(std::string name) : name_(std::move(name)) {}

Recipe& Recipe::describe(std::string text) {
    description_ = std::move(text);
    return *this;
}

Recipe& Recipe::gpus(int n) {
    LEVERS_CHECK(n >= 1, "recipe '{}': gpus({}) must be >= 1", name_, n);
    gpus_ = n;
    return *this;
}

Recipe& Recipe::add_param(const std::string& name, ParamValue value, std::string help) {
    LEVERS_CHECK(valid_identifier(name), "recipe '{}': parameter name '{}' must be lower-case letters, digits, _ or -",
                 name_, name);
    for (const auto& p : params_) LEVERS_CHECK(p.name != name, "recipe '{}': parameter '{}' declared twice", name_, name);
    params_.push_back({name, std::move(value), std::move(help)});
    return *this;
}

Recipe& Recipe::param(const std::string& n, int v, std::string h) { return add_param(n, long{v}, std::move(h)); }
Recipe& Recipe::param(const std::string& n, long v, std::string h) { return add_param(n, v, std::move(h)); }
Recipe& Recipe::param(const std::string& n, double v, std::string h) { return add_param(n, v, std::move(h)); }
Recipe& Recipe::param(const std::string& n, bool v, std::string h) { return add_param(n, v, std::move(h)); }
Recipe& Recipe::param(const std::string& n, const char* v, std::string h) {
    return add_param(n, std::string(v), std::move(h));
}
Recipe& Recipe::param(const std::string& n, std::string v, std::string h) { return add_param(n, std::move(v), std::move(h)); }
Recipe& Recipe::param(const std::string& n, std::initializer_list<long> v, std::string h) {
    return add_param(n, std::vector<long>(v), std::move(h));
}

Recipe& Recipe::run(RecipeBody body) {
    body_ = std::move(body);
    return *this;
}

void Recipe::validate() const {
    LEVERS_CHECK(valid_identifier(name_), "recipe name '{}' must be lower-case letters, digits, _ or -", name_);
    LEVERS_CHECK(static_cast<bool>(body_), "recipe '{}' has no body: call .run(fn)", name_);
}

bool register_recipe(const std::string& name, Recipe (*factory)()) {
    auto [it, inserted] = factories().emplace(name, factory);
    LEVERS_CHECK(inserted, "two recipes are registered as '{}'", name);
    return true;
}

std::vector<std::string> recipe_names() {
    std::vector<std::string> names;
    for (const auto& [name, f] : factories()) names.push_back(name);
    return names;
}

Recipe find_recipe(const std::string& name) {
    auto it = factories().find(name);
    if (it == factories().end()) {
        std::string closest;
        std::size_t best = SIZE_MAX;
        for (const auto& [candidate, f] : factories()) {
            std::size_t d = edit_distance(name, candidate);
            if (d < best) best = d, closest = candidate;
        }
        std::string hint = closest.empty() || best > std::max<std::size_t>(3, name.size() / 2)
                               ? ""
                               : fmt::format("; did you mean '{}'?", closest);
        LEVERS_FAIL("unknown recipe '{}'{} (`recipe list` shows them all)", name, hint);
    }
    Recipe r = it->second();
    LEVERS_CHECK(r.name() == name, "recipe registered as '{}' names itself '{}'", name, r.name());
    r.validate();
    return r;
}

}  // namespace levers

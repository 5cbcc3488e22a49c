#include "framework/recipe/recipe.hpp"

#include "framework/core/error.hpp"
#include "framework/recipe/framework_loop.hpp"

#include <algorithm>
#include <map>

namespace levers {

namespace {

std::map<std::string, Plan (*)()>& factories() {
    static std::map<std::string, Plan (*)()> registry;
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

RecipeSpec::RecipeSpec(std::string name) : name_(std::move(name)) {}

RecipeSpec& RecipeSpec::describe(std::string text) {
    description_ = std::move(text);
    return *this;
}

RecipeSpec& RecipeSpec::gpus(int n) {
    LEVERS_CHECK(n >= 1, "recipe '{}': gpus({}) must be >= 1", name_, n);
    gpus_ = n;
    return *this;
}

RecipeSpec& RecipeSpec::add_param(const std::string& name, ParamValue value, std::string help, Bounds bounds) {
    LEVERS_CHECK(valid_identifier(name), "recipe '{}': parameter name '{}' must be lower-case letters, digits, _ or -",
                 name_, name);
    for (const auto& p : params_) LEVERS_CHECK(p.name != name, "recipe '{}': parameter '{}' declared twice", name_, name);
    params_.push_back({name, std::move(value), std::move(help), bounds});
    try {
        check_bounds(params_.back(), params_.back().default_value);
    } catch (const Error& e) {
        LEVERS_FAIL("recipe '{}': the default of {}", name_, e.message());
    }
    return *this;
}

RecipeSpec& RecipeSpec::param(const std::string& n, int v, std::string h, Bounds b) {
    return add_param(n, long{v}, std::move(h), b);
}
RecipeSpec& RecipeSpec::param(const std::string& n, long v, std::string h, Bounds b) { return add_param(n, v, std::move(h), b); }
RecipeSpec& RecipeSpec::param(const std::string& n, double v, std::string h, Bounds b) {
    return add_param(n, v, std::move(h), b);
}
RecipeSpec& RecipeSpec::param(const std::string& n, bool v, std::string h) { return add_param(n, v, std::move(h)); }
RecipeSpec& RecipeSpec::param(const std::string& n, const char* v, std::string h) {
    return add_param(n, std::string(v), std::move(h));
}
RecipeSpec& RecipeSpec::param(const std::string& n, std::string v, std::string h) { return add_param(n, std::move(v), std::move(h)); }
RecipeSpec& RecipeSpec::param(const std::string& n, std::initializer_list<int> v, std::string h, Bounds b) {
    return add_param(n, std::vector<long>(v.begin(), v.end()), std::move(h), b);
}
RecipeSpec& RecipeSpec::param(const std::string& n, std::initializer_list<double> v, std::string h, Bounds b) {
    return add_param(n, std::vector<double>(v), std::move(h), b);
}

RecipeSpec& RecipeSpec::check(std::function<void(const Config&)> fn) {
    check_ = std::move(fn);
    return *this;
}

RecipeSpec& RecipeSpec::run(RecipeBody body) {
    body_ = std::move(body);
    return *this;
}

RecipeSpec& RecipeSpec::adjust_loop(std::function<void(const Config&, train::LoopOptions&)> adjust) {
    loop_.adjust = std::move(adjust);
    return *this;
}

RecipeSpec& RecipeSpec::training(const TrainingDefaults& d) {
    param("steps", d.steps, "optimizer steps", at_least(1));
    param("lr", d.lr, "peak learning rate (warmup, then cosine decay)", at_least(0));
    param("warmup", d.warmup, "warmup steps", at_least(0));
    param("weight_decay", d.weight_decay, "AdamW's decoupled weight decay, on the parameters that decay", at_least(0));
    param("grad_clip", d.grad_clip, "global gradient-norm limit (0: off)", at_least(0));
    param("log_every", d.log_every, "steps per progress line (0: a twentieth of the steps)", at_least(0));
    training_declared_ = true;
    return *this;
}

RecipeSpec& RecipeSpec::evaluate_at_start() {
    loop_.eval_at_start = true;
    return *this;
}

RecipeSpec& RecipeSpec::checkpoint_every(Count n) {
    loop_.checkpoint_every = std::move(n);
    return *this;
}

RecipeSpec& RecipeSpec::keep_checkpoints(int last, std::string metric, bool maximize) {
    loop_.keep_last = last;
    loop_.best_metric = std::move(metric);
    loop_.best_maximize = maximize;
    return *this;
}

RecipeSpec& RecipeSpec::early_stop(std::string metric, long patience, bool maximize, double min_delta) {
    loop_.early_stop = {std::move(metric), patience, maximize, min_delta};
    return *this;
}

RecipeSpec& RecipeSpec::grad_accum(Count k) {
    loop_.grad_accum = std::move(k);
    return *this;
}

long Count::resolve(const Config& cfg) const { return param.empty() ? value : cfg.get<long>(param); }

namespace {

void check_count(const std::string& recipe, const char* what, const Count& c, const Config& defaults, long min) {
    if (!c.param.empty()) {
        LEVERS_CHECK(defaults.has(c.param), "recipe '{}': {}(\"{}\") names no declared parameter", recipe, what, c.param);
        LEVERS_CHECK(std::holds_alternative<long>(defaults.values()[defaults.index(c.param)]),
                     "recipe '{}': {}(\"{}\") needs an int parameter", recipe, what, c.param);
    }
    LEVERS_CHECK(c.resolve(defaults) >= min, "recipe '{}': {} must be >= {}, got {}", recipe, what, min,
                 c.resolve(defaults));
}

}  // namespace

Plan RecipeSpec::build() const {
    LEVERS_CHECK(valid_identifier(name_), "recipe name '{}' must be lower-case letters, digits, _ or -", name_);
    const Config defaults(params_);
    if (!loop_.set()) {
        LEVERS_CHECK(static_cast<bool>(body_), "recipe '{}' has no body: give .run(fn), or .model, .data and .step",
                     name_);
        return Plan(std::make_shared<const RecipeSpec>(*this));
    }
    LEVERS_CHECK(!body_, "recipe '{}': .run(fn) and the framework's loop (.model/.data/.step) exclude each other",
                 name_);
    LEVERS_CHECK(loop_.make_model && loop_.make_data && loop_.step, "recipe '{}': the framework's loop needs .model, "
                 ".data and .step (missing: {}{}{})", name_, loop_.make_model ? "" : ".model ",
                 loop_.make_data ? "" : ".data ", loop_.step ? "" : ".step");
    LEVERS_CHECK(training_declared_, "recipe '{}': declare the framework loop's settings with .training({{.steps = "
                 "..., .lr = ...}})", name_);
    check_count(name_, "evaluate_every", loop_.eval_every, defaults, 0);
    check_count(name_, "checkpoint_every", loop_.checkpoint_every, defaults, 0);
    check_count(name_, "grad_accum", loop_.grad_accum, defaults, 1);
    LEVERS_CHECK(loop_.keep_last >= 1, "recipe '{}': keep_checkpoints({}) must keep at least one", name_,
                 loop_.keep_last);
    LEVERS_CHECK(loop_.best_metric.empty() || loop_.evaluate,
                 "recipe '{}': keeping the best checkpoint by '{}' needs .evaluate_every", name_, loop_.best_metric);
    LEVERS_CHECK(!loop_.eval_at_start || loop_.evaluate, "recipe '{}': evaluate_at_start() needs .evaluate_every",
                 name_);
    if (!loop_.early_stop.metric.empty()) {
        LEVERS_CHECK(static_cast<bool>(loop_.evaluate), "recipe '{}': early_stop(\"{}\") needs .evaluate_every to "
                     "report the metric", name_, loop_.early_stop.metric);
        LEVERS_CHECK(loop_.early_stop.patience >= 1 && loop_.early_stop.min_delta >= 0,
                     "recipe '{}': early_stop needs patience >= 1 and min_delta >= 0", name_);
    }
    return Plan(std::make_shared<const RecipeSpec>(*this));
}

std::vector<Result> RecipeSpec::map(const std::vector<std::map<std::string, std::string>>& cells,
                                const std::map<std::string, std::string>& every_cell) const {
    return build().map(cells, every_cell);
}

std::vector<Plan::ModelParameter> Plan::model_parameters(const Config& cfg) const {
    std::vector<ModelParameter> out;
    if (!r_->loop_.make_model) return out;
    const LoopSpec::Erased model = r_->loop_.make_model(cfg);
    if (nn::Module* m = r_->loop_.module_of ? r_->loop_.module_of(model.get()) : nullptr) {
        for (const auto& [name, p] : m->named_parameters()) out.push_back({name, p->shape(), p->trainable(), p->decays()});
        return out;
    }
    for (const auto& e : r_->loop_.params_of(model.get()).entries()) out.push_back({e.name, e.shape, true, e.decay});
    return out;
}

Result Plan::run(const Config& cfg) const {
    return framework_loop() ? run_framework_loop(name(), r_->loop_, cfg) : r_->body_(cfg);
}

void Plan::check(const Config& cfg) const {
    if (framework_loop()) framework_loop_options(r_->loop_, cfg).validate();
    if (r_->check_) r_->check_(cfg);
}

bool register_recipe(const std::string& name, Plan (*factory)()) {
    auto [it, inserted] = factories().emplace(name, factory);
    LEVERS_CHECK(inserted, "two recipes are registered as '{}'", name);
    return true;
}

bool is_registered(const std::string& name) { return factories().count(name) > 0; }

std::vector<std::string> recipe_names() {
    std::vector<std::string> names;
    for (const auto& [name, f] : factories()) names.push_back(name);
    return names;
}

Plan find_recipe(const std::string& name) {
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
    Plan p = it->second();
    LEVERS_CHECK(p.name() == name, "recipe registered as '{}' names itself '{}'", name, p.name());
    return p;
}

}  // namespace levers

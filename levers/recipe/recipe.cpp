#include "levers/recipe/recipe.hpp"

#include "levers/core/error.hpp"
#include "levers/recipe/framework_loop.hpp"

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

// The framework loop's settings agree with each other and with the parameters.
void check_loop(const RecipeDef& def) {
    const LoopSpec& loop = def.loop;
    const std::string& name = def.name;
    const Config defaults(def.params);
    LEVERS_CHECK(!def.body, "recipe '{}': .run(fn) and the framework's loop (.model/.data/.step) exclude each other",
                 name);
    LEVERS_CHECK(loop.make_model && loop.make_data && loop.step, "recipe '{}': the framework's loop needs .model, "
                 ".data and .step (missing: {}{}{})", name, loop.make_model ? "" : ".model ",
                 loop.make_data ? "" : ".data ", loop.step ? "" : ".step");
    LEVERS_CHECK(def.training_declared, "recipe '{}': declare the framework loop's settings with .training({{.steps = "
                 "..., .lr = ...}})", name);
    LEVERS_CHECK(!loop.evaluate || defaults.has(settings::eval_every.name()), "recipe '{}': .evaluate(fn) runs "
                 "every eval_every steps: give its default in .training({{.eval_every = N}}) (0: at the end only)",
                 name);
    LEVERS_CHECK(loop.keep_last >= 1, "recipe '{}': keep_checkpoints({}) must keep at least one", name,
                 loop.keep_last);
    LEVERS_CHECK(loop.best_metric.empty() || loop.evaluate,
                 "recipe '{}': keeping the best checkpoint by '{}' needs .evaluate_every", name, loop.best_metric);
    LEVERS_CHECK(!loop.eval_at_start || loop.evaluate, "recipe '{}': evaluate_at_start() needs .evaluate_every",
                 name);
    if (!loop.early_stop.metric.empty()) {
        LEVERS_CHECK(static_cast<bool>(loop.evaluate), "recipe '{}': early_stop(\"{}\") needs .evaluate_every to "
                     "report the metric", name, loop.early_stop.metric);
        LEVERS_CHECK(loop.early_stop.patience >= 1 && loop.early_stop.min_delta >= 0,
                     "recipe '{}': early_stop needs patience >= 1 and min_delta >= 0", name);
    }
}

}  // namespace

namespace detail {

void set_gpus(RecipeDef& def, int n) {
    LEVERS_CHECK(n >= 1, "recipe '{}': gpus({}) must be >= 1", def.name, n);
    def.gpus = n;
}

void add_param(RecipeDef& def, ParamSpec spec) {
    const std::string& name = spec.name;
    LEVERS_CHECK(valid_identifier(name), "recipe '{}': parameter name '{}' must be lower-case letters, digits, _ or -",
                 def.name, name);
    for (const auto& p : def.params)
        LEVERS_CHECK(p.name != name, "recipe '{}': parameter '{}' declared twice", def.name, name);
    const ParamValue& value = spec.default_value;
    const bool numeric = !std::holds_alternative<std::string>(value) && !std::holds_alternative<bool>(value);
    LEVERS_CHECK(spec.bounds.empty() || numeric, "recipe '{}': parameter '{}' is a {}; bounds ({}) limit numbers only",
                 def.name, name, type_name(value), spec.bounds.str());
    def.params.push_back(std::move(spec));
    try {
        check_bounds(def.params.back(), def.params.back().default_value);
    } catch (const Error& e) {
        LEVERS_FAIL("recipe '{}': the default of {}", def.name, e.message());
    }
}

void declare_training(RecipeDef& def, const TrainingDefaults& d) {
    namespace s = settings;
    add_param(def, s::steps.with_default(d.steps).spec());
    add_param(def, s::lr.with_default(d.lr).spec());
    add_param(def, s::warmup.with_default(d.warmup).spec());
    add_param(def, s::weight_decay.with_default(d.weight_decay).spec());
    add_param(def, s::grad_clip.with_default(d.grad_clip).spec());
    add_param(def, s::log_every.with_default(d.log_every).spec());
    add_param(def, s::zero.with_default(static_cast<int>(d.zero)).spec());
    add_param(def, s::grad_accum.with_default(d.grad_accum).spec());
    add_param(def, s::checkpoint_every.with_default(d.checkpoint_every).spec());
    if (d.batch_size) {
        add_param(def, s::batch_size.with_default(*d.batch_size).spec());
        add_param(def, s::global_batch.spec());
        def.loop.micro_batch = s::batch_size.name();
    }
    if (d.seed) {
        LEVERS_CHECK(*d.seed >= 0, "recipe '{}': .training's seed must be >= 0, got {}", def.name, *d.seed);
        add_param(def, s::seed.with_default(static_cast<std::uint64_t>(*d.seed)).spec());
    }
    if (d.eval_every) add_param(def, s::eval_every.with_default(*d.eval_every).spec());
    def.training_declared = true;
}

void declare_lora(RecipeDef& def, const LoraDefaults& d) {
    add_param(def, settings::lora_r.with_default(static_cast<int>(d.r)).spec());
    add_param(def, settings::lora_alpha.with_default(d.alpha).spec());
    add_param(def, settings::lora_targets.with_default(d.targets).spec());
    add_param(def, settings::quantize.spec());
    add_param(def, settings::double_quant.spec());
    add_param(def, settings::save_quantized.spec());
    add_param(def, settings::train_router.spec());
    add_param(def, settings::router.spec());
}

Recipe freeze(const RecipeDef& def) {
    LEVERS_CHECK(valid_identifier(def.name), "recipe name '{}' must be lower-case letters, digits, _ or -", def.name);
    if (def.loop.set()) check_loop(def);
    else LEVERS_CHECK(static_cast<bool>(def.body), "recipe '{}' has no body: give .run(fn), or .model, .data and .step",
                      def.name);
    return Recipe(std::make_shared<const RecipeDef>(def));
}

}  // namespace detail

std::vector<Recipe::ModelParameter> Recipe::model_parameters(const Config& cfg) const {
    std::vector<ModelParameter> out;
    if (!r_->loop.make_model) return out;
    const LoopSpec::Erased model = r_->loop.make_model(cfg);
    if (nn::Module* m = r_->loop.module_of ? r_->loop.module_of(model.get()) : nullptr) {
        for (const auto& [name, p] : m->named_parameters()) out.push_back({name, p->shape(), p->trainable(), p->decays()});
        return out;
    }
    for (const auto& e : r_->loop.params_of(model.get()).entries()) out.push_back({e.name, e.shape, true, e.decay});
    return out;
}

Result Recipe::run(const Config& cfg) const {
    return framework_loop() ? run_framework_loop(name(), r_->loop, cfg) : r_->body(cfg);
}

void Recipe::check(const Config& cfg) const {
    if (framework_loop()) framework_loop_options(r_->loop, cfg).validate();
    if (r_->check) r_->check(cfg);
}

bool register_recipe(const std::string& name, Recipe (*factory)()) {
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
    Recipe p = it->second();
    LEVERS_CHECK(p.name() == name, "recipe registered as '{}' names itself '{}'", name, p.name());
    return p;
}

}  // namespace levers

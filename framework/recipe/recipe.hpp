// The recipe DSL and registry.
//
// A recipe is declared with a fluent builder; build() validates it and gives
// an immutable Plan. The body is written one of two ways:
//
// the framework owns the loop (the same recipe runs on 1..8 cards):
//
//   LEVERS_RECIPE(classify) {
//       return levers::recipe("classify")
//           .describe("MLP on Fashion-MNIST")
//           .param("steps", 3000, "optimizer steps") ...
//           .model(make_mlp)                 // M or unique_ptr<M> (const Config&): an nn::Module, or any type with params()
//           .data(load_images)               // D or unique_ptr<D> (const Config&)
//           .step(train_step)                // MicroResult (M&, D&, const StepInfo&)
//           .evaluate_every("eval_every", validate)  // Metrics (M&, D&), combined over ranks
//           .checkpoint_every(500)
//           .early_stop("val_loss", 3)
//           .finish(report);                 // Result (M&, D&, const LoopResult& [, const Config&])
//   }
//
// or the recipe owns it: .run(fn) with Result fn(const Config&), a per-rank
// function using the rank helpers of framework/dist/context.hpp.
//
// Parameters the framework's loop reads when the recipe declares them: steps,
// lr, warmup, weight_decay, grad_clip, log_every (see loop_params.hpp).
#pragma once

#include "framework/core/params.hpp"
#include "framework/nn/module.hpp"
#include "framework/recipe/config.hpp"
#include "framework/train/loop.hpp"

#include <nlohmann/json.hpp>

#include <concepts>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <vector>

namespace levers {

// What a recipe returns: one JSON object, printed as the last line of `recipe run`.
using Result = nlohmann::json;
using RecipeBody = std::function<Result(const Config&)>;
using train::LoopResult;
using train::Metrics;
using train::MicroResult;

// Where the framework's loop is when it calls the step function.
struct StepInfo {
    long step = 0;   // optimizer step, from 0
    long micro = 0;  // micro-batch within it, from 0 (grad_accum)
};

// A count given as a number or as the name of an int parameter.
struct Count {
    long value = 0;
    std::string param;
    Count(long v) : value(v) {}  // NOLINT: implicit on purpose
    Count(int v) : value(v) {}   // NOLINT
    Count(const char* p) : param(p) {}  // NOLINT
    long resolve(const Config& cfg) const;
};

using EarlyStop = train::EarlyStopping;

// The framework-owned loop, its user functions type-erased.
struct LoopSpec {
    using Erased = std::shared_ptr<void>;
    std::function<Erased(const Config&)> make_model, make_data;
    std::type_index model_type = typeid(void), data_type = typeid(void);
    std::function<ParamSet&(void*)> params_of;
    // Moves the model to a device computing in a dtype: set when the model
    // type has to(Device, DType) (every nn::Module) or to_device(Device[, DType]).
    std::function<void(void*, Device, DType)> to_device;
    bool to_device_takes_dtype = false;
    // The model as an nn::Module (null for other types): the loop switches it
    // between training and evaluation and keeps its state in checkpoints.
    std::function<nn::Module*(void*)> module_of;
    std::function<MicroResult(void*, void*, const StepInfo&)> step;
    std::type_index step_model = typeid(void), step_data = typeid(void);
    std::function<Metrics(void*, void*)> evaluate;
    std::type_index eval_model = typeid(void), eval_data = typeid(void);
    std::function<Result(void*, void*, const LoopResult&, const Config&)> finish;
    std::type_index finish_model = typeid(void), finish_data = typeid(void);
    std::function<void(const Config&, train::LoopOptions&)> optimizer;
    // The data's position (a cursor, RNG states) for exact resumes: set when
    // the data type has nlohmann::json save_state() const and load_state(json).
    std::function<nlohmann::json(const void*)> save_data;
    std::function<void(void*, const nlohmann::json&)> load_data;
    Count eval_every = 0, checkpoint_every = 0, grad_accum = 1;
    int keep_last = 3;       // checkpoints kept, newest first
    std::string best_metric;  // also keep best.ckpt by this metric (default: early stopping's)
    bool best_maximize = false;
    bool eval_at_start = false;
    EarlyStop early_stop;
    bool set() const { return static_cast<bool>(make_model) || static_cast<bool>(step); }
};

class Plan;

class Recipe {
public:
    explicit Recipe(std::string name);

    Recipe& describe(std::string text);
    Recipe& gpus(int n);  // the default card count
    // `bounds` limits a number (or each item of a list): .param("steps", 3000, "optimizer steps", at_least(1)).
    Recipe& param(const std::string& name, int default_value, std::string help, Bounds bounds = {});
    Recipe& param(const std::string& name, long default_value, std::string help, Bounds bounds = {});
    Recipe& param(const std::string& name, double default_value, std::string help, Bounds bounds = {});
    Recipe& param(const std::string& name, bool default_value, std::string help);
    Recipe& param(const std::string& name, const char* default_value, std::string help);
    Recipe& param(const std::string& name, std::string default_value, std::string help);
    Recipe& param(const std::string& name, std::initializer_list<int> default_value, std::string help,
                  Bounds bounds = {});
    Recipe& param(const std::string& name, std::initializer_list<double> default_value, std::string help,
                  Bounds bounds = {});
    // Checks a whole config before anything starts (files exist, parameters
    // agree with each other); throws levers::Error. `recipe run` and `recipe
    // sweep` call it, so bad input exits 2 with no run directory made.
    Recipe& check(std::function<void(const Config&)> fn);

    // The recipe owns its loop.
    Recipe& run(RecipeBody body);

    // The framework owns the loop.
    template <class F> Recipe& model(F make);
    template <class F> Recipe& data(F make);
    template <class F> Recipe& step(F fn) { return set_step(std::function{std::move(fn)}); }
    template <class F> Recipe& evaluate_every(Count n, F fn) {
        loop_.eval_every = std::move(n);
        return set_evaluate(std::function{std::move(fn)});
    }
    template <class F> Recipe& finish(F fn) { return set_finish(std::function{std::move(fn)}); }
    // Adjusts the optimizer and schedule the parameters gave (AdamW's betas, the decay floor, ...).
    Recipe& optimizer(std::function<void(const Config&, train::LoopOptions&)> adjust);
    Recipe& evaluate_at_start();        // also before the first step: the result gains <metric>_at_start
    // Writes the whole training state every n steps to <run>/checkpoints/ (and
    // at the end); `recipe run --resume` continues from one exactly.
    Recipe& checkpoint_every(Count n);
    // How many to keep (the newest), and best.ckpt by `metric` if given.
    Recipe& keep_checkpoints(int last, std::string metric = "", bool maximize = false);
    Recipe& early_stop(std::string metric, long patience, bool maximize = false, double min_delta = 0);
    Recipe& grad_accum(Count k);

    // Checks the whole and freezes it; throws levers::Error naming what is wrong.
    Plan build() const;
    // build().map(cells, every_cell): the recipe must also be registered under its name.
    std::vector<Result> map(const std::vector<std::map<std::string, std::string>>& cells,
                            const std::map<std::string, std::string>& every_cell = {}) const;
    operator Plan() const;  // NOLINT: LEVERS_RECIPE bodies may return the builder

private:
    friend class Plan;
    Recipe& add_param(const std::string& name, ParamValue value, std::string help, Bounds bounds = {});
    template <class M, class D> Recipe& set_step(std::function<MicroResult(M&, D&, const StepInfo&)> fn);
    template <class M, class D> Recipe& set_evaluate(std::function<Metrics(M&, D&)> fn);
    template <class M, class D> Recipe& set_finish(std::function<Result(M&, D&, const LoopResult&)> fn);
    template <class M, class D>
    Recipe& set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)> fn);

    std::string name_, description_;
    int gpus_ = 1;
    std::vector<ParamSpec> params_;
    RecipeBody body_;
    std::function<void(const Config&)> check_;
    LoopSpec loop_;
};

// A built recipe: what the registry holds and `recipe run` executes.
class Plan {
public:
    const std::string& name() const { return r_->name_; }
    const std::string& description() const { return r_->description_; }
    int default_gpus() const { return r_->gpus_; }
    const std::vector<ParamSpec>& params() const { return r_->params_; }
    Config defaults() const { return Config(r_->params_); }
    bool framework_loop() const { return r_->loop_.set(); }

    // Runs the body as this rank of the current job (collective when it has several ranks).
    Result run(const Config& cfg) const;
    // Throws levers::Error for a config that would fail once running: the
    // recipe's .check, and for the framework's loop its settings (steps >= 1, ...).
    void check(const Config& cfg) const;

    // The parameters of the model `cfg` builds (recipes whose loop the
    // framework owns; none otherwise), by the names checkpoints and
    // safetensors files use. Builds the model on the CPU.
    struct ModelParameter {
        std::string name;
        Shape shape;
        bool trainable = true, decay = true;
    };
    std::vector<ModelParameter> model_parameters(const Config& cfg) const;

    // Runs each cell (parameter overrides, plus `every_cell`'s) as its own
    // one-card job, as many at once as cards allow, and returns one result per
    // cell in order, each with "status" ("ok" or "failed", then with "error"
    // and "log"). See sweep.hpp.
    std::vector<Result> map(const std::vector<std::map<std::string, std::string>>& cells,
                            const std::map<std::string, std::string>& every_cell = {}) const;

private:
    friend class Recipe;
    explicit Plan(std::shared_ptr<const Recipe> r) : r_(std::move(r)) {}
    std::shared_ptr<const Recipe> r_;
};

// Starts a recipe builder.
inline Recipe recipe(std::string name) { return Recipe(std::move(name)); }

// Registry: LEVERS_RECIPE registers a factory at start-up; lookups build it.
bool register_recipe(const std::string& name, Plan (*factory)());
std::vector<std::string> recipe_names();  // sorted
bool is_registered(const std::string& name);
// Throws levers::Error for an unknown name, suggesting the closest one.
Plan find_recipe(const std::string& name);

// --- template members -------------------------------------------------------

namespace detail {
template <class R> struct Made { using type = R; static constexpr bool owned = false; };
template <class T> struct Made<std::unique_ptr<T>> { using type = T; static constexpr bool owned = true; };

template <class F> std::shared_ptr<void> make_erased(const F& make, const Config& cfg) {
    using R = std::invoke_result_t<const F&, const Config&>;
    using T = typename Made<R>::type;
    if constexpr (Made<R>::owned) return std::shared_ptr<T>(make(cfg));
    else return std::make_shared<T>(make(cfg));
}
}  // namespace detail

template <class F> Recipe& Recipe::model(F make) {
    using M = typename detail::Made<std::invoke_result_t<const F&, const Config&>>::type;
    static_assert(std::is_same_v<decltype(std::declval<M&>().params()), ParamSet&>,
                  "a model must have ParamSet& params(): the parameters the optimizer trains (every nn::Module has)");
    loop_.make_model = [make = std::move(make)](const Config& cfg) { return detail::make_erased(make, cfg); };
    loop_.model_type = typeid(M);
    loop_.params_of = [](void* m) -> ParamSet& { return static_cast<M*>(m)->params(); };
    if constexpr (std::is_base_of_v<nn::Module, M>)
        loop_.module_of = [](void* m) -> nn::Module* { return static_cast<M*>(m); };
    if constexpr (requires(M& m, Device d, DType t) { m.to(d, t); }) {
        loop_.to_device = [](void* m, Device d, DType t) { static_cast<M*>(m)->to(d, t); };
        loop_.to_device_takes_dtype = true;
    } else if constexpr (requires(M& m, Device d, DType t) { m.to_device(d, t); }) {
        loop_.to_device = [](void* m, Device d, DType t) { static_cast<M*>(m)->to_device(d, t); };
        loop_.to_device_takes_dtype = true;
    } else if constexpr (requires(M& m, Device d) { m.to_device(d); }) {
        loop_.to_device = [](void* m, Device d, DType) { static_cast<M*>(m)->to_device(d); };
    }
    return *this;
}

template <class F> Recipe& Recipe::data(F make) {
    using D = typename detail::Made<std::invoke_result_t<const F&, const Config&>>::type;
    loop_.make_data = [make = std::move(make)](const Config& cfg) { return detail::make_erased(make, cfg); };
    loop_.data_type = typeid(D);
    if constexpr (requires(D& d, const D& cd, const nlohmann::json& j) {
                      { cd.save_state() } -> std::convertible_to<nlohmann::json>;
                      d.load_state(j);
                  }) {
        loop_.save_data = [](const void* d) { return static_cast<const D*>(d)->save_state(); };
        loop_.load_data = [](void* d, const nlohmann::json& j) { static_cast<D*>(d)->load_state(j); };
    }
    return *this;
}

template <class M, class D> Recipe& Recipe::set_step(std::function<MicroResult(M&, D&, const StepInfo&)> fn) {
    loop_.step = [fn = std::move(fn)](void* m, void* d, const StepInfo& s) {
        return fn(*static_cast<M*>(m), *static_cast<D*>(d), s);
    };
    loop_.step_model = typeid(M);
    loop_.step_data = typeid(D);
    return *this;
}

template <class M, class D> Recipe& Recipe::set_evaluate(std::function<Metrics(M&, D&)> fn) {
    loop_.evaluate = [fn = std::move(fn)](void* m, void* d) { return fn(*static_cast<M*>(m), *static_cast<D*>(d)); };
    loop_.eval_model = typeid(M);
    loop_.eval_data = typeid(D);
    return *this;
}

template <class M, class D> Recipe& Recipe::set_finish(std::function<Result(M&, D&, const LoopResult&)> fn) {
    return set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)>(
        [fn = std::move(fn)](M& m, D& d, const LoopResult& r, const Config&) { return fn(m, d, r); }));
}

template <class M, class D>
Recipe& Recipe::set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)> fn) {
    loop_.finish = [fn = std::move(fn)](void* m, void* d, const LoopResult& r, const Config& cfg) {
        return fn(*static_cast<M*>(m), *static_cast<D*>(d), r, cfg);
    };
    loop_.finish_model = typeid(M);
    loop_.finish_data = typeid(D);
    return *this;
}

}  // namespace levers

#define LEVERS_RECIPE(id)                                                                         \
    static ::levers::Plan levers_recipe_factory_##id();                                          \
    [[maybe_unused]] static const bool levers_recipe_registered_##id =                           \
        ::levers::register_recipe(#id, &levers_recipe_factory_##id);                             \
    static ::levers::Plan levers_recipe_factory_##id()

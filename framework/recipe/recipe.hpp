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
//           .param("seed", 1, "initialisation and data-order seed") ...
//           .training({.steps = 3000, .lr = 1e-3, .warmup = 100})  // the loop's settings, as parameters
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
// The types are checked as the builder is written: a .step whose model or
// data type is not what .model and .data make does not compile.
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
    std::function<ParamSet&(void*)> params_of;
    // Moves the model to a device computing in a dtype: set when the model
    // type has to(Device, DType) (every nn::Module) or to_device(Device[, DType]).
    std::function<void(void*, Device, DType)> to_device;
    bool to_device_takes_dtype = false;
    // The model as an nn::Module (null for other types): the loop switches it
    // between training and evaluation and keeps its state in checkpoints.
    std::function<nn::Module*(void*)> module_of;
    std::function<MicroResult(void*, void*, const StepInfo&)> step;
    std::function<Metrics(void*, void*)> evaluate;
    std::function<Result(void*, void*, const LoopResult&, const Config&)> finish;
    std::function<void(const Config&, train::LoopOptions&)> adjust;  // .adjust_loop
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

// The framework loop's settings, declared as parameters by .training({...})
// (so a misspelt setting does not compile): each becomes a parameter of its
// name with this default, set with --set like any other.
struct TrainingDefaults {
    long steps = 1000;         // optimizer steps
    double lr = 1e-3;          // peak learning rate (warmup, then cosine decay)
    long warmup = 0;           // warmup steps
    double weight_decay = 0;   // AdamW's decoupled weight decay, on the parameters that decay
    double grad_clip = 1.0;    // global gradient-norm limit (0: off)
    long log_every = 0;        // steps per progress line (0: a twentieth of the steps)
};

// The builder's state, untyped: what BasicRecipe (below) fills and Plan reads.
class RecipeSpec {
public:
    explicit RecipeSpec(std::string name);

    RecipeSpec& describe(std::string text);
    RecipeSpec& gpus(int n);  // the default card count
    // `bounds` limits a number (or each item of a list): .param("steps", 3000, "optimizer steps", at_least(1)).
    RecipeSpec& param(const std::string& name, int default_value, std::string help, Bounds bounds = {});
    RecipeSpec& param(const std::string& name, long default_value, std::string help, Bounds bounds = {});
    RecipeSpec& param(const std::string& name, double default_value, std::string help, Bounds bounds = {});
    RecipeSpec& param(const std::string& name, bool default_value, std::string help);
    RecipeSpec& param(const std::string& name, const char* default_value, std::string help);
    RecipeSpec& param(const std::string& name, std::string default_value, std::string help);
    RecipeSpec& param(const std::string& name, std::initializer_list<int> default_value, std::string help,
                  Bounds bounds = {});
    RecipeSpec& param(const std::string& name, std::initializer_list<double> default_value, std::string help,
                  Bounds bounds = {});
    // Checks a whole config before anything starts (files exist, parameters
    // agree with each other); throws levers::Error. `recipe run` and `recipe
    // sweep` call it, so bad input exits 2 with no run directory made.
    RecipeSpec& check(std::function<void(const Config&)> fn);

    // The recipe owns its loop.
    RecipeSpec& run(RecipeBody body);

    // The framework owns the loop.
    template <class F> RecipeSpec& model(F make);
    template <class F> RecipeSpec& data(F make);
    // Declares the loop's settings as parameters (steps, lr, warmup, weight_decay, grad_clip, log_every).
    RecipeSpec& training(const TrainingDefaults& defaults);
    // Adjusts the loop's options the parameters gave (AdamW's betas, the decay floor, the unit counted...).
    RecipeSpec& adjust_loop(std::function<void(const Config&, train::LoopOptions&)> adjust);
    RecipeSpec& evaluate_at_start();        // also before the first step: the result gains <metric>_at_start
    // Writes the whole training state every n steps to <run>/checkpoints/ (and
    // at the end); `recipe run --resume` continues from one exactly.
    RecipeSpec& checkpoint_every(Count n);
    // How many to keep (the newest), and best.ckpt by `metric` if given.
    RecipeSpec& keep_checkpoints(int last, std::string metric = "", bool maximize = false);
    RecipeSpec& early_stop(std::string metric, long patience, bool maximize = false, double min_delta = 0);
    RecipeSpec& grad_accum(Count k);

    // Checks the whole and freezes it; throws levers::Error naming what is wrong.
    Plan build() const;
    // build().map(cells, every_cell): the recipe must also be registered under its name.
    std::vector<Result> map(const std::vector<std::map<std::string, std::string>>& cells,
                            const std::map<std::string, std::string>& every_cell = {}) const;

    RecipeSpec& add_param(const std::string& name, ParamValue value, std::string help, Bounds bounds = {});
    template <class M, class D> RecipeSpec& set_step(std::function<MicroResult(M&, D&, const StepInfo&)> fn);
    template <class M, class D> RecipeSpec& set_evaluate(std::function<Metrics(M&, D&)> fn);
    template <class M, class D> RecipeSpec& set_finish(std::function<Result(M&, D&, const LoopResult&)> fn);
    template <class M, class D>
    RecipeSpec& set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)> fn);

private:
    friend class Plan;
    std::string name_, description_;
    int gpus_ = 1;
    std::vector<ParamSpec> params_;
    RecipeBody body_;
    std::function<void(const Config&)> check_;
    LoopSpec loop_;
    bool training_declared_ = false;

public:
    LoopSpec& loop() { return loop_; }
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
    friend class RecipeSpec;
    explicit Plan(std::shared_ptr<const RecipeSpec> r) : r_(std::move(r)) {}
    std::shared_ptr<const RecipeSpec> r_;
};

namespace detail {
template <class R> struct Made { using type = R; static constexpr bool owned = false; };
template <class T> struct Made<std::unique_ptr<T>> { using type = T; static constexpr bool owned = true; };

template <class F> std::shared_ptr<void> make_erased(const F& make, const Config& cfg) {
    using R = std::invoke_result_t<const F&, const Config&>;
    using T = typename Made<R>::type;
    if constexpr (Made<R>::owned) return std::shared_ptr<T>(make(cfg));
    else return std::make_shared<T>(make(cfg));
}

// Whether fn(M&, D&, extra...) returns R; false (not an error) while M or D is unknown.
template <class R, class F, class M, class D, class... Extra> constexpr bool callable_on() {
    if constexpr (std::is_void_v<M> || std::is_void_v<D>) return false;
    else return std::is_invocable_r_v<R, F&, M&, D&, Extra...>;
}
}  // namespace detail

// The builder. Its type carries what .model and .data make (M, D), so the
// loop's functions are checked as they are given: a .step, .evaluate_every
// or .finish that takes other types, or a loop without .model or .data, does
// not compile, and the compiler's message says which rule was broken.
template <class M = void, class D = void> class BasicRecipe {
public:
    explicit BasicRecipe(std::string name) : s_(std::move(name)) {}
    explicit BasicRecipe(RecipeSpec s) : s_(std::move(s)) {}

    BasicRecipe& describe(std::string text) { return with(s_.describe(std::move(text))); }
    BasicRecipe& gpus(int n) { return with(s_.gpus(n)); }  // the default card count
    // `bounds` limits a number (or each item of a list): .param("seed", 1, "data-order seed", at_least(0)).
    template <class T> BasicRecipe& param(const std::string& name, T value, std::string help, Bounds bounds = {}) {
        return with(s_.param(name, value, std::move(help), bounds));
    }
    BasicRecipe& param(const std::string& name, bool value, std::string help) {
        return with(s_.param(name, value, std::move(help)));
    }
    BasicRecipe& param(const std::string& name, const char* value, std::string help) {
        return with(s_.param(name, value, std::move(help)));
    }
    BasicRecipe& param(const std::string& name, std::string value, std::string help) {
        return with(s_.param(name, std::move(value), std::move(help)));
    }
    BasicRecipe& param(const std::string& name, std::initializer_list<int> value, std::string help, Bounds bounds = {}) {
        return with(s_.param(name, value, std::move(help), bounds));
    }
    BasicRecipe& param(const std::string& name, std::initializer_list<double> value, std::string help,
                       Bounds bounds = {}) {
        return with(s_.param(name, value, std::move(help), bounds));
    }
    // Checks a whole config before anything starts (files exist, parameters
    // agree with each other); throws levers::Error. `recipe run` and `recipe
    // sweep` call it, so bad input exits 2 with no run directory made.
    BasicRecipe& check(std::function<void(const Config&)> fn) { return with(s_.check(std::move(fn))); }

    // The recipe owns its loop: Result fn(const Config&), run on every rank.
    BasicRecipe& run(RecipeBody body) { return with(s_.run(std::move(body))); }

    // The framework owns the loop: the model and the data, built on every rank...
    template <class F> auto model(F make) const {
        static_assert(std::is_void_v<M>, "recipe: .model is given twice");
        using Made = typename detail::Made<std::invoke_result_t<const F&, const Config&>>::type;
        RecipeSpec s = s_;
        s.model(std::move(make));
        return BasicRecipe<Made, D>(std::move(s));
    }
    template <class F> auto data(F make) const {
        static_assert(std::is_void_v<D>, "recipe: .data is given twice");
        using Made = typename detail::Made<std::invoke_result_t<const F&, const Config&>>::type;
        RecipeSpec s = s_;
        s.data(std::move(make));
        return BasicRecipe<M, Made>(std::move(s));
    }
    // ...the loop's settings, ...
    BasicRecipe& training(const TrainingDefaults& defaults) { return with(s_.training(defaults)); }
    // ...and what a step does: MicroResult fn(M&, D&, const StepInfo&): the loss, then loss.backward().
    template <class F> BasicRecipe& step(F fn) {
        static_assert(!std::is_void_v<M>, "recipe: declare .model before .step");
        static_assert(!std::is_void_v<D>, "recipe: declare .data before .step (the framework's loop needs both)");
        constexpr bool fits = detail::callable_on<MicroResult, F, M, D, const StepInfo&>();
        static_assert(fits || std::is_void_v<M> || std::is_void_v<D>,
                      "recipe: .step(fn) must take the types .model and .data make: MicroResult fn(M&, D&, const "
                      "StepInfo&)");
        if constexpr (fits) s_.set_step(std::function<MicroResult(M&, D&, const StepInfo&)>(std::move(fn)));
        return *this;
    }
    // Metrics fn(M&, D&) every n steps (a number or an int parameter's name), combined over ranks.
    template <class F> BasicRecipe& evaluate_every(Count n, F fn) {
        static_assert(!std::is_void_v<M> && !std::is_void_v<D>, "recipe: declare .model and .data before "
                      ".evaluate_every");
        constexpr bool fits = detail::callable_on<Metrics, F, M, D>();
        static_assert(fits || std::is_void_v<M> || std::is_void_v<D>,
                      "recipe: .evaluate_every(n, fn) must take the types .model and .data make: Metrics fn(M&, D&)");
        s_.loop().eval_every = std::move(n);
        if constexpr (fits) s_.set_evaluate(std::function<Metrics(M&, D&)>(std::move(fn)));
        return *this;
    }
    // Result fn(M&, D&, const LoopResult& [, const Config&]): extra fields of the result.
    template <class F> BasicRecipe& finish(F fn) {
        static_assert(!std::is_void_v<M> && !std::is_void_v<D>, "recipe: declare .model and .data before .finish");
        constexpr bool with_config = detail::callable_on<Result, F, M, D, const LoopResult&, const Config&>();
        constexpr bool fits = with_config || detail::callable_on<Result, F, M, D, const LoopResult&>();
        static_assert(fits || std::is_void_v<M> || std::is_void_v<D>,
                      "recipe: .finish(fn) must take the types .model and .data make: Result fn(M&, D&, const "
                      "LoopResult& [, const Config&])");
        if constexpr (with_config)
            s_.set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)>(std::move(fn)));
        else if constexpr (fits)
            s_.set_finish(std::function<Result(M&, D&, const LoopResult&)>(std::move(fn)));
        return *this;
    }
    // Adjusts the loop's options the parameters gave (AdamW's betas, the decay floor, the unit counted...).
    BasicRecipe& adjust_loop(std::function<void(const Config&, train::LoopOptions&)> fn) {
        return with(s_.adjust_loop(std::move(fn)));
    }
    BasicRecipe& evaluate_at_start() { return with(s_.evaluate_at_start()); }  // the result gains <metric>_at_start
    // Writes the whole training state every n steps to <run>/checkpoints/ (and
    // at the end); `recipe run --resume` continues from one exactly.
    BasicRecipe& checkpoint_every(Count n) { return with(s_.checkpoint_every(std::move(n))); }
    // How many to keep (the newest), and best.ckpt by `metric` if given.
    BasicRecipe& keep_checkpoints(int last, std::string metric = "", bool maximize = false) {
        return with(s_.keep_checkpoints(last, std::move(metric), maximize));
    }
    BasicRecipe& early_stop(std::string metric, long patience, bool maximize = false, double min_delta = 0) {
        return with(s_.early_stop(std::move(metric), patience, maximize, min_delta));
    }
    BasicRecipe& grad_accum(Count k) { return with(s_.grad_accum(std::move(k))); }

    // Checks the whole and freezes it; throws levers::Error naming what is wrong.
    Plan build() const {
        static_assert(std::is_void_v<M> == std::is_void_v<D>, "recipe: the framework's loop needs both .model and "
                      ".data");
        return s_.build();
    }
    operator Plan() const { return build(); }  // NOLINT: LEVERS_RECIPE bodies return the builder
    // build().map(cells, every_cell): the recipe must also be registered under its name.
    std::vector<Result> map(const std::vector<std::map<std::string, std::string>>& cells,
                            const std::map<std::string, std::string>& every_cell = {}) const {
        return build().map(cells, every_cell);
    }

private:
    BasicRecipe& with(RecipeSpec&) { return *this; }
    RecipeSpec s_;
};

// Starts a recipe builder.
inline BasicRecipe<> recipe(std::string name) { return BasicRecipe<>(std::move(name)); }

// Registry: LEVERS_RECIPE registers a factory at start-up; lookups build it.
bool register_recipe(const std::string& name, Plan (*factory)());
std::vector<std::string> recipe_names();  // sorted
bool is_registered(const std::string& name);
// Throws levers::Error for an unknown name, suggesting the closest one.
Plan find_recipe(const std::string& name);

// --- template members -------------------------------------------------------


template <class F> RecipeSpec& RecipeSpec::model(F make) {
    using M = typename detail::Made<std::invoke_result_t<const F&, const Config&>>::type;
    static_assert(std::is_same_v<decltype(std::declval<M&>().params()), ParamSet&>,
                  "a model must have ParamSet& params(): the parameters the optimizer trains (every nn::Module has)");
    loop_.make_model = [make = std::move(make)](const Config& cfg) { return detail::make_erased(make, cfg); };
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

template <class F> RecipeSpec& RecipeSpec::data(F make) {
    using D = typename detail::Made<std::invoke_result_t<const F&, const Config&>>::type;
    loop_.make_data = [make = std::move(make)](const Config& cfg) { return detail::make_erased(make, cfg); };
    if constexpr (requires(D& d, const D& cd, const nlohmann::json& j) {
                      { cd.save_state() } -> std::convertible_to<nlohmann::json>;
                      d.load_state(j);
                  }) {
        loop_.save_data = [](const void* d) { return static_cast<const D*>(d)->save_state(); };
        loop_.load_data = [](void* d, const nlohmann::json& j) { static_cast<D*>(d)->load_state(j); };
    }
    return *this;
}

template <class M, class D> RecipeSpec& RecipeSpec::set_step(std::function<MicroResult(M&, D&, const StepInfo&)> fn) {
    loop_.step = [fn = std::move(fn)](void* m, void* d, const StepInfo& s) {
        return fn(*static_cast<M*>(m), *static_cast<D*>(d), s);
    };
    return *this;
}

template <class M, class D> RecipeSpec& RecipeSpec::set_evaluate(std::function<Metrics(M&, D&)> fn) {
    loop_.evaluate = [fn = std::move(fn)](void* m, void* d) { return fn(*static_cast<M*>(m), *static_cast<D*>(d)); };
    return *this;
}

template <class M, class D> RecipeSpec& RecipeSpec::set_finish(std::function<Result(M&, D&, const LoopResult&)> fn) {
    return set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)>(
        [fn = std::move(fn)](M& m, D& d, const LoopResult& r, const Config&) { return fn(m, d, r); }));
}

template <class M, class D>
RecipeSpec& RecipeSpec::set_finish(std::function<Result(M&, D&, const LoopResult&, const Config&)> fn) {
    loop_.finish = [fn = std::move(fn)](void* m, void* d, const LoopResult& r, const Config& cfg) {
        return fn(*static_cast<M*>(m), *static_cast<D*>(d), r, cfg);
    };
    return *this;
}

}  // namespace levers

#define LEVERS_RECIPE(id)                                                                         \
    static ::levers::Plan levers_recipe_factory_##id();                                          \
    [[maybe_unused]] static const bool levers_recipe_registered_##id =                           \
        ::levers::register_recipe(#id, &levers_recipe_factory_##id);                             \
    static ::levers::Plan levers_recipe_factory_##id()

// The recipe DSL and registry.
//
// A recipe is declared with a fluent builder; build() validates it and gives
// an immutable Recipe. Its parameters are handles declared once (param.hpp),
// registered with .params and read back as cfg[handle]; the settings every
// training recipe has are the framework's (settings.hpp), declared by
// .training. The body is written one of two ways:
//
// the framework owns the loop (the same recipe runs on 1..8 GPUs):
//
//   const Param<int> width{"width", 256, "hidden width", at_least(1)};
//
//   LEVERS_RECIPE(classify) {
//       return levers::recipe("classify")
//           .describe("MLP on Fashion-MNIST")
//           .training({.steps = 3000, .lr = 1e-3, .warmup = 100,   // the loop's and the data's settings
//                      .batch_size = 64, .seed = 1, .eval_every = 500})
//           .params(width)                   // the recipe's own parameters
//           .model(make_mlp)                 // M or unique_ptr<M> (const Config&): an nn::Module, or any type with params()
//           .data(load_images)               // D or unique_ptr<D> (const Config&): cfg[settings::batch_size] ...
//           .step(train_step)                // MicroResult (M&, D&, const StepInfo&)
//           .evaluate(validate)              // Metrics (M&, D&) every eval_every steps, combined over ranks
//           .early_stop("val_loss", 3)
//           .finish(report);                 // Result (M&, D&, const LoopResult& [, const Config&])
//   }
//
// or the recipe owns it: .run(fn) with Result fn(const Config&), a per-rank
// function using the rank helpers of levers/distributed/context.hpp. Every
// function given a Config also gets the run with it: cfg.run() (its
// directory, precision and checkpoint; run_context.hpp).
//
// The types are checked as the builder is written: a .step whose model or
// data type is not what .model and .data make does not compile, nor does a
// parameter read through a handle that does not exist.
#pragma once

#include "levers/core/params.hpp"
#include "levers/nn/module.hpp"
#include "levers/recipe/config.hpp"
#include "levers/recipe/loop_params.hpp"
#include "levers/recipe/param.hpp"
#include "levers/recipe/settings.hpp"
#include "levers/train/loop.hpp"

#include <nlohmann/json.hpp>

#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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

using EarlyStop = train::EarlyStopping;

// The framework-owned loop, its user functions type-erased (the builder fills it).
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
    // The int parameter that is a rank's micro-batch (settings::batch_size,
    // where .training declares it), and the bool one that turns activation
    // checkpointing on (.activation_checkpointing): what `recipe plan` varies
    // and --set micro_batch=auto sets.
    std::string micro_batch, checkpointing;
    int keep_last = 3;       // checkpoints kept, newest first
    std::string best_metric;  // also keep best.ckpt by this metric (default: early stopping's)
    bool best_maximize = false;
    bool eval_at_start = false;
    EarlyStop early_stop;
    bool set() const { return static_cast<bool>(make_model) || static_cast<bool>(step); }
};

// The framework loop's settings (settings.hpp), declared as parameters by
// .training({...}) with these defaults (so a misspelt setting does not
// compile), each set with --set like any other. The loop reads them itself:
// grad_accum, eval_every and checkpoint_every need nothing more. The data's
// (batch_size with global_batch, seed) and eval_every are declared where given.
struct TrainingDefaults {
    long steps = 1000;         // optimizer steps
    double lr = 1e-3;          // peak learning rate (warmup, then cosine decay)
    long warmup = 0;           // warmup steps
    double weight_decay = 0;   // AdamW's decoupled weight decay, on the parameters that decay
    double grad_clip = 1.0;    // global gradient-norm limit (0: off)
    long log_every = 0;        // steps per progress line (0: a twentieth of the steps)
    long zero = 0;             // 0: data parallel; 1, 2: ZeRO stage (optimizer state; and gradients) sharded
    long grad_accum = 1;       // micro-batches per optimizer step
    long checkpoint_every = 0;  // steps between training checkpoints (0: none)
    std::optional<long> batch_size;  // samples per micro-batch and rank: what `recipe plan` varies
    std::optional<long> seed;        // initialisation and data-order seed
    std::optional<long> eval_every;  // steps between evaluations (.evaluate); 0: at the end only
};

// LoRA's settings (settings.hpp: lora_r, lora_alpha, lora_targets; QLoRA's quantize, double_quant; a mixture
// of experts' train_router and router), declared by .lora({...}).
struct LoraDefaults {
    long r = 8;          // adapter rank; 0: every weight trains
    double alpha = 16;   // updates scaled by alpha / r
    std::string targets = "all-linear";  // every Linear but lm_head, as PEFT's target_modules="all-linear"
};

// A recipe as declared, untyped: what the builder (below) fills and a Recipe freezes.
struct RecipeDef {
    std::string name, description;
    int gpus = 1;  // the default GPU count
    std::vector<ParamSpec> params;
    std::function<void(const Config&)> check;
    RecipeBody body;  // the recipe owns its loop (.run) ...
    LoopSpec loop;    // ... or the framework does
    bool training_declared = false;
};

class Recipe;

namespace detail {
// The builder's checked steps, out of line (recipe.cpp); each throws levers::Error naming what is wrong.
void set_gpus(RecipeDef& def, int n);
void add_param(RecipeDef& def, ParamSpec spec);
void declare_training(RecipeDef& def, const TrainingDefaults& defaults);
void declare_lora(RecipeDef& def, const LoraDefaults& defaults);
Recipe freeze(const RecipeDef& def);

template <class R> struct Made { using type = R; static constexpr bool owned = false; };
template <class T> struct Made<std::unique_ptr<T>> { using type = T; static constexpr bool owned = true; };
// What make(const Config&) builds: R, or T for std::unique_ptr<T>.
template <class F> using made_t = typename Made<std::invoke_result_t<const F&, const Config&>>::type;

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

// Fills the loop's model functions for a maker of M: its parameters, its
// module (when it is one) and how it moves to a device.
template <class M, class F> void erase_model(LoopSpec& loop, F make) {
    static_assert(std::is_same_v<decltype(std::declval<M&>().params()), ParamSet&>,
                  "a model must have ParamSet& params(): the parameters the optimizer trains (every nn::Module has)");
    loop.make_model = [make = std::move(make)](const Config& cfg) { return make_erased(make, cfg); };
    loop.params_of = [](void* m) -> ParamSet& { return static_cast<M*>(m)->params(); };
    if constexpr (std::is_base_of_v<nn::Module, M>)
        loop.module_of = [](void* m) -> nn::Module* { return static_cast<M*>(m); };
    if constexpr (requires(M& m, Device d, DType t) { m.to(d, t); }) {
        loop.to_device = [](void* m, Device d, DType t) { static_cast<M*>(m)->to(d, t); };
        loop.to_device_takes_dtype = true;
    } else if constexpr (requires(M& m, Device d, DType t) { m.to_device(d, t); }) {
        loop.to_device = [](void* m, Device d, DType t) { static_cast<M*>(m)->to_device(d, t); };
        loop.to_device_takes_dtype = true;
    } else if constexpr (requires(M& m, Device d) { m.to_device(d); }) {
        loop.to_device = [](void* m, Device d, DType) { static_cast<M*>(m)->to_device(d); };
    }
}

// Fills the loop's data functions for a maker of D, with its position when D can save and load it.
template <class D, class F> void erase_data(LoopSpec& loop, F make) {
    loop.make_data = [make = std::move(make)](const Config& cfg) { return make_erased(make, cfg); };
    if constexpr (requires(D& d, const D& cd, const nlohmann::json& j) {
                      { cd.save_state() } -> std::convertible_to<nlohmann::json>;
                      d.load_state(j);
                  }) {
        loop.save_data = [](const void* d) { return static_cast<const D*>(d)->save_state(); };
        loop.load_data = [](void* d, const nlohmann::json& j) { static_cast<D*>(d)->load_state(j); };
    }
}
}  // namespace detail

// A built recipe: what the registry holds and `recipe run` executes.
class Recipe {
public:
    const std::string& name() const { return r_->name; }
    const std::string& description() const { return r_->description; }
    int default_gpus() const { return r_->gpus; }
    const std::vector<ParamSpec>& params() const { return r_->params; }
    Config defaults() const { return Config(r_->params); }
    bool framework_loop() const { return r_->loop.set(); }
    // The framework-owned loop's functions (null for .run recipes): what the memory plan traces.
    const LoopSpec* loop_spec() const { return framework_loop() ? &r_->loop : nullptr; }

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
    // one-GPU job, as many at once as GPUs allow, and returns one result per
    // cell in order, each with "status" ("ok" or "failed", then with "error"
    // and "log"). `from` is the calling run (cfg.run()): the cells compute in
    // its precision and keep their runs in its directory. The recipe must be
    // registered under its name. See map_cells.hpp.
    std::vector<Result> map(const RunContext& from, const std::vector<std::map<std::string, std::string>>& cells,
                            const std::map<std::string, std::string>& every_cell = {}) const;

private:
    friend Recipe detail::freeze(const RecipeDef& def);
    explicit Recipe(std::shared_ptr<const RecipeDef> r) : r_(std::move(r)) {}
    std::shared_ptr<const RecipeDef> r_;
};

// The builder. Its type carries what .model and .data make (M, D), so the
// loop's functions are checked as they are given: a .step, .evaluate
// or .finish that takes other types, or a loop without .model or .data, does
// not compile, and the compiler's message says which rule was broken.
template <class M = void, class D = void> class BasicRecipe {
public:
    explicit BasicRecipe(std::string name) { def_.name = std::move(name); }

    BasicRecipe& describe(std::string text) {
        def_.description = std::move(text);
        return *this;
    }
    BasicRecipe& gpus(int n) {  // the default GPU count
        detail::set_gpus(def_, n);
        return *this;
    }
    // The recipe's own parameters, each a handle declared once (param.hpp):
    // .params(width, depth). A framework setting with this recipe's default:
    // .params(settings::seed.with_default(7)).
    template <class... T> BasicRecipe& params(const Param<T>&... handles) {
        (detail::add_param(def_, handles.spec()), ...);
        return *this;
    }
    // Checks a whole config before anything starts (files exist, parameters
    // agree with each other); throws levers::Error. `recipe run` and `recipe
    // sweep` call it, so bad input exits 2 with no run directory made.
    BasicRecipe& check(std::function<void(const Config&)> fn) {
        def_.check = std::move(fn);
        return *this;
    }

    // The recipe owns its loop: Result fn(const Config&), run on every rank.
    BasicRecipe& run(RecipeBody body) {
        def_.body = std::move(body);
        return *this;
    }

    // The framework owns the loop: the model (M or unique_ptr<M> make(const
    // Config&)) and the data (likewise), built on every rank...
    template <class F> auto model(F make) const {
        static_assert(std::is_void_v<M>, "recipe: .model is given twice");
        using Made = detail::made_t<F>;
        BasicRecipe<Made, D> next(def_);
        detail::erase_model<Made>(next.def_.loop, std::move(make));
        return next;
    }
    template <class F> auto data(F make) const {
        static_assert(std::is_void_v<D>, "recipe: .data is given twice");
        using Made = detail::made_t<F>;
        BasicRecipe<M, Made> next(def_);
        detail::erase_data<Made>(next.def_.loop, std::move(make));
        return next;
    }
    // ...the loop's settings, declared as parameters (settings.hpp: steps, lr, ..., batch_size, seed), ...
    BasicRecipe& training(const TrainingDefaults& defaults) {
        detail::declare_training(def_, defaults);
        return *this;
    }
    // ...and what a step does: MicroResult fn(M&, D&, const StepInfo&): the loss, then loss.backward().
    template <class F> BasicRecipe& step(F fn) {
        static_assert(!std::is_void_v<M>, "recipe: declare .model before .step");
        static_assert(!std::is_void_v<D>, "recipe: declare .data before .step (the framework's loop needs both)");
        constexpr bool fits = detail::callable_on<MicroResult, F, M, D, const StepInfo&>();
        static_assert(fits || std::is_void_v<M> || std::is_void_v<D>,
                      "recipe: .step(fn) must take the types .model and .data make: MicroResult fn(M&, D&, const "
                      "StepInfo&)");
        if constexpr (fits)
            def_.loop.step = [fn = std::move(fn)](void* m, void* d, const StepInfo& s) mutable -> MicroResult {
                return fn(*static_cast<M*>(m), *static_cast<D*>(d), s);
            };
        return *this;
    }
    // Metrics fn(M&, D&) every eval_every steps (.training's) and at the end, combined over ranks.
    template <class F> BasicRecipe& evaluate(F fn) {
        static_assert(!std::is_void_v<M> && !std::is_void_v<D>, "recipe: declare .model and .data before .evaluate");
        constexpr bool fits = detail::callable_on<Metrics, F, M, D>();
        static_assert(fits || std::is_void_v<M> || std::is_void_v<D>,
                      "recipe: .evaluate(fn) must take the types .model and .data make: Metrics fn(M&, D&)");
        if constexpr (fits)
            def_.loop.evaluate = [fn = std::move(fn)](void* m, void* d) mutable -> Metrics {
                return fn(*static_cast<M*>(m), *static_cast<D*>(d));
            };
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
        if constexpr (fits)
            def_.loop.finish = [fn = std::move(fn)](void* m, void* d, const LoopResult& r,
                                                    const Config& cfg) mutable -> Result {
                if constexpr (with_config) return fn(*static_cast<M*>(m), *static_cast<D*>(d), r, cfg);
                else return fn(*static_cast<M*>(m), *static_cast<D*>(d), r);
            };
        return *this;
    }
    // Adjusts the loop's options the parameters gave (AdamW's betas, the decay floor, the unit counted...).
    BasicRecipe& adjust_loop(std::function<void(const Config&, train::LoopOptions&)> fn) {
        def_.loop.adjust = std::move(fn);
        return *this;
    }
    // Also evaluates before the first step: the result gains <metric>_at_start.
    BasicRecipe& evaluate_at_start() {
        def_.loop.eval_at_start = true;
        return *this;
    }
    // Training checkpoints (every checkpoint_every steps, .training's, and at
    // the end, in <run>/checkpoints/; `recipe run --resume` continues from one
    // exactly): how many to keep (the newest), and best.ckpt by `metric` if given.
    BasicRecipe& keep_checkpoints(int last, std::string metric = "", bool maximize = false) {
        def_.loop.keep_last = last;
        def_.loop.best_metric = std::move(metric);
        def_.loop.best_maximize = maximize;
        return *this;
    }
    // Stops when `metric` has not improved by min_delta for `patience` evaluations.
    BasicRecipe& early_stop(std::string metric, long patience, bool maximize = false, double min_delta = 0) {
        def_.loop.early_stop = {std::move(metric), patience, maximize, min_delta};
        return *this;
    }
    // LoRA's settings as parameters (settings.hpp: lora_r, lora_alpha, lora_targets, QLoRA's quantize and
    // double_quant, a mixture's train_router and router), with these defaults.
    BasicRecipe& lora(const LoraDefaults& defaults) {
        detail::declare_lora(def_, defaults);
        return *this;
    }
    // Declares the bool parameter "checkpointing" (default off) that the
    // model's maker reads to recompute its blocks' activations during
    // backward (nn::checkpoint); `recipe plan` weighs both.
    BasicRecipe& activation_checkpointing() {
        detail::add_param(def_, settings::checkpointing.spec());
        def_.loop.checkpointing = settings::checkpointing.name();
        return *this;
    }

    // Checks the whole and freezes it; throws levers::Error naming what is wrong.
    Recipe build() const {
        static_assert(std::is_void_v<M> == std::is_void_v<D>, "recipe: the framework's loop needs both .model and "
                      ".data");
        return detail::freeze(def_);
    }
    operator Recipe() const { return build(); }  // NOLINT: LEVERS_RECIPE bodies return the builder
    // build().map(from, cells, every_cell): see Recipe::map.
    std::vector<Result> map(const RunContext& from, const std::vector<std::map<std::string, std::string>>& cells,
                            const std::map<std::string, std::string>& every_cell = {}) const {
        return build().map(from, cells, every_cell);
    }

private:
    template <class, class> friend class BasicRecipe;
    explicit BasicRecipe(RecipeDef def) : def_(std::move(def)) {}
    RecipeDef def_;
};

// Starts a recipe builder.
inline BasicRecipe<> recipe(std::string name) { return BasicRecipe<>(std::move(name)); }

// Registry: LEVERS_RECIPE registers a factory at start-up; lookups build it.
bool register_recipe(const std::string& name, Recipe (*factory)());
std::vector<std::string> recipe_names();  // sorted
bool is_registered(const std::string& name);
// Throws levers::Error for an unknown name, suggesting the closest one.
Recipe find_recipe(const std::string& name);

}  // namespace levers

#define LEVERS_RECIPE(id)                                                                         \
    static ::levers::Recipe levers_recipe_factory_##id();                                          \
    [[maybe_unused]] static const bool levers_recipe_registered_##id =                           \
        ::levers::register_recipe(#id, &levers_recipe_factory_##id);                             \
    static ::levers::Recipe levers_recipe_factory_##id()

#include "framework/recipe/framework_loop.hpp"

#include "framework/core/checkpoint.hpp"
#include "framework/dist/context.hpp"
#include "framework/recipe/loop_params.hpp"
#include "framework/recipe/run_dir.hpp"

namespace levers {

namespace {

// The trainable parameters and where training is, in the run directory.
void save_parameters(const std::filesystem::path& file, const std::string& recipe, const ParamSet<float>& params,
                     const Config& cfg, long step) {
    std::vector<NamedTensor> tensors;
    for (std::size_t i = 0; i < params.entries().size(); ++i)
        tensors.push_back({params.entries()[i].name, params.param_tensor(static_cast<int>(i))});
    write_checkpoint(file, {{"recipe", recipe}, {"step", step}, {"config", cfg.to_json()}}, tensors);
}

}  // namespace

Result run_framework_loop(const std::string& recipe, const LoopSpec& spec, const Config& cfg) {
    auto model = spec.make_model(cfg);
    auto data = spec.make_data(cfg);
    ParamSet<float>& params = spec.params_of(model.get());

    train::LoopOptions options = loop_options(cfg);
    options.unit = "samples";  // what MicroResult::items counts; .optimizer may say "tok"
    options.grad_accum = spec.grad_accum.resolve(cfg);
    options.eval_every = spec.eval_every.resolve(cfg);
    options.early_stop = spec.early_stop;
    options.eval_at_start = spec.eval_at_start;
    if (spec.optimizer) spec.optimizer(cfg, options);

    const long checkpoint_every = spec.checkpoint_every.resolve(cfg);
    const std::filesystem::path dir = run_dir();
    if (checkpoint_every > 0) {
        LEVERS_CHECK(!dir.empty(), "recipe '{}' writes checkpoints, but this run has no run directory", recipe);
        options.after_step = [&](long done) {
            if (done % checkpoint_every != 0 || !dist::is_main()) return;
            save_parameters(dir / "checkpoint.ckpt", recipe, params, cfg, done);
        };
    }
    std::function<Metrics(long)> evaluate;
    if (spec.evaluate) evaluate = [&](long) { return spec.evaluate(model.get(), data.get()); };
    auto step = [&](long s, long micro) { return spec.step(model.get(), data.get(), StepInfo{s, micro}); };

    const LoopResult run = train::train_loop(params, options, step, evaluate);
    if (checkpoint_every > 0 && run.steps % checkpoint_every != 0 && dist::is_main())
        save_parameters(dir / "checkpoint.ckpt", recipe, params, cfg, run.steps);  // the final state too

    Result out = {{"loss", run.loss}, {"steps", run.steps}, {"seconds", run.seconds},
                  {"items_per_second", run.items_per_second}, {"ranks", dist::world_size()}};
    for (const auto& [name, value] : run.last_eval) out[name] = value;
    for (const auto& [name, value] : run.first_eval) out[name + "_at_start"] = value;
    if (!spec.early_stop.metric.empty()) {
        out["stopped_early"] = run.stopped_early;
        out["best_step"] = run.best_step;
        out["best_" + spec.early_stop.metric] = run.best_metric;
    }
    if (spec.finish) out.update(spec.finish(model.get(), data.get(), run));
    return out;
}

}  // namespace levers

#include "levers/recipe/framework_loop.hpp"

#include "levers/core/dispatch.hpp"
#include "levers/core/live_progress.hpp"
#include "levers/core/out_of_memory.hpp"
#include "levers/distributed/context.hpp"
#include "levers/recipe/checkpoints.hpp"
#include "levers/recipe/loop_params.hpp"
#include "levers/recipe/memory_plan.hpp"
#include "levers/train/metrics_log.hpp"
#include "levers/train/train_state.hpp"

#include <optional>
#include <sys/resource.h>

namespace levers {

namespace {

// Each rank's data state, gathered on every rank (rank 0 writes them).
std::vector<nlohmann::json> gather_data_states(const LoopSpec& spec, const void* data) {
    const nlohmann::json mine = spec.save_data ? spec.save_data(data) : nlohmann::json();
    std::vector<nlohmann::json> all;
    for (const auto& text : dist::all_gather_text(mine.dump())) all.push_back(nlohmann::json::parse(text));
    return all;
}

// Loads the checkpoint `path` into the model, the data and the loop's start.
void resume(const std::string& recipe, const LoopSpec& spec, const std::filesystem::path& path, void* model,
            ParamSet& params, void* data, train::LoopOptions& options, train::TrainState& state) {
    state = train::read_train_state(path);
    const std::string wrote = state.file.metadata.value("recipe", "?");
    LEVERS_CHECK(wrote == recipe, "--resume {}: written by recipe '{}', not '{}'", path.string(), wrote, recipe);
    train::load_parameters(state, params, path);
    if (nn::Module* m = spec.module_of ? spec.module_of(model) : nullptr)
        m->load_state(state.file.metadata.value("model_state", nlohmann::json::object()));
    options.start = state.loop;
    options.restore_optimizer = [&state](train::AdamW& o) {
        o.load(state.file.at("adamw/m"), state.file.at("adamw/v"), state.adamw_steps);
    };
    if (state.world_size != dist::world_size()) {
        const int world = dist::world_size();
        if (const long accum = train::grad_accum_on(state, world, path); accum > 0) {
            dist::print0("resuming a {}-rank run on {} rank{}: grad_accum {} -> {} keeps its global batch, so each "
                         "step sees the same data\n", state.world_size, world, world == 1 ? "" : "s",
                         state.grad_accum, accum);
            options.grad_accum = accum;
        } else {
            dist::print0("warning: resuming a {}-rank run on {} rank{}: the checkpoint does not record its "
                         "grad_accum, so the data is re-sharded and the rest of the run is not the one an "
                         "uninterrupted run would have made\n", state.world_size, world, world == 1 ? "" : "s");
        }
    }
    const nlohmann::json& saved = state.data[static_cast<std::size_t>(std::min(dist::rank(), state.world_size - 1))];
    if (spec.load_data && !saved.is_null())
        spec.load_data(data, saved);
    else
        dist::print0("warning: the data keeps no position (no save_state/load_state): the resumed run draws other "
                     "batches than an uninterrupted one would\n");
    dist::print0("resumed from {} at step {}\n", path.string(), state.loop.step);
}

// The model and data built on every rank, the model moved to `device`.
struct Built {
    LoopSpec::Erased model, data;
    nn::Module* module = nullptr;
};

Built build(const std::string& recipe, const LoopSpec& spec, const Config& cfg, Device device) {
    Built b;
    b.model = spec.make_model(cfg);
    b.module = spec.module_of ? spec.module_of(b.model.get()) : nullptr;
    if (!device.is_cpu()) {
        LEVERS_CHECK(spec.to_device, "recipe '{}' cannot run on {}: its model type has no to(Device, DType), so it "
                     "runs on the CPU only; use --device cpu", recipe, device.str());
        const DType dtype = cfg.run().compute;
        LEVERS_CHECK(dtype == DType::f32 || spec.to_device_takes_dtype,
                     "recipe '{}' cannot compute in {}: its model type's to_device(Device) takes no dtype, so it "
                     "computes in f32 only; use --precision f32", recipe, name_of(dtype));
        spec.to_device(b.model.get(), device, dtype);
    }
    if (b.module) b.module->set_stream(static_cast<std::uint64_t>(dist::rank()));  // each rank its own dropout
    b.data = spec.make_data(cfg);
    return b;
}

Result train_on(const std::string& recipe, const LoopSpec& spec, const Config& cfg, Device device, bool& stepped);

// A GPU that ran out of memory: the model and data are gone (unwound), so the
// plan traces the run as configured, on shapes alone, and says what fits.
[[noreturn]] void out_of_memory(const std::string& recipe, const LoopSpec& spec, const Config& cfg, const OutOfMemory& e) {
    std::string advice;
    try {
        const MemoryPlan plan = plan_memory(
            recipe, spec, cfg, {.ranks = dist::world_size(), .device = Device::Kind::cuda, .compute = cfg.run().compute});
        advice = out_of_memory_advice(plan);
    } catch (const Error& plan_failed) {
        advice = "no memory plan: " + plan_failed.message();
    }
    LEVERS_FAIL("rank {}: {}. {}", dist::rank(), e.message(), advice);
}

Result train_or_explain(const std::string& recipe, const LoopSpec& spec, const Config& cfg, Device device,
                        bool& stepped) {
    if (device.is_cpu()) return train_on(recipe, spec, cfg, device, stepped);
    try {
        return train_on(recipe, spec, cfg, device, stepped);
    } catch (const OutOfMemory& e) {
        out_of_memory(recipe, spec, cfg, e);
    }
}

}  // namespace

Result run_framework_loop(const std::string& recipe, const LoopSpec& spec, const Config& cfg) {
    const Device device = dist::device();
    bool stepped = false;
    if (device.is_cpu() || !cfg.run().device_auto) return train_or_explain(recipe, spec, cfg, device, stepped);
    try {
        return train_or_explain(recipe, spec, cfg, device, stepped);
    } catch (const MissingKernel& e) {
        // --device auto: a model that needs an op the GPU lacks trains on the CPU, where every op has a kernel.
        if (stepped) throw;
        dist::print0("recipe {}: the model uses op '{}', which has no {} kernel in {}; training on the CPU instead "
                     "(--device cpu skips the GPU)\n",
                     recipe, e.op(), name_of(e.device().kind), name_of(e.dtype()));
        Config on_cpu = cfg;
        RunContext run = cfg.run();
        run.compute = DType::f32;
        on_cpu.set_run(std::move(run));
        return train_on(recipe, spec, on_cpu, Device::cpu(), stepped);
    }
}

train::LoopOptions framework_loop_options(const LoopSpec& spec, const Config& cfg) {
    train::LoopOptions options = loop_options(cfg);
    options.unit = "samples";  // what MicroResult::items counts; .adjust_loop may say "tok"
    // --set micro_batch=auto's accumulation, which keeps the samples per step the recipe's settings give.
    if (cfg.run().grad_accum > 0) options.grad_accum = cfg.run().grad_accum;
    options.early_stop = spec.early_stop;
    options.eval_at_start = spec.eval_at_start;
    if (spec.adjust) spec.adjust(cfg, options);
    return options;
}

namespace {

// metrics.csv goes on from where the run starts: rows of later steps (an
// attempt that failed after its last checkpoint, restarted in its own
// directory) are dropped, to be written again. Rank 0 writes it.
std::optional<train::MetricsLog> open_metrics(const std::filesystem::path& dir, long start_step) {
    std::optional<train::MetricsLog> metrics;
    if (!dir.empty() && dist::is_main()) {
        train::trim_metrics(dir, start_step);
        metrics.emplace(dir);
    }
    return metrics;
}

using AfterStep = std::function<void(const train::LoopState&, const train::AdamW&, const Metrics*)>;

// After every `every`-th step and the last: a training checkpoint. Every rank
// gathers its data position (a collective); rank 0 writes, atomically, and
// keeps the newest and the best; no rank runs ahead of a checkpoint being written.
AfterStep checkpoint_every(long every, long last_step, long grad_accum, CheckpointKeeper& keeper,
                           const std::string& recipe, const LoopSpec& spec, const Config& cfg, nn::Module* module,
                           ParamSet& params, const void* data, train::MetricsLog* metrics) {
    return [=, &keeper, &spec, &cfg, &params](const train::LoopState& st, const train::AdamW& opt,
                                              const Metrics* eval) {
        if (st.step % every != 0 && st.step != last_step) return;
        if (metrics) metrics->flush();  // a restart from this checkpoint finds every row up to it
        const auto states = gather_data_states(spec, data);
        // Under ZeRO on one node each rank writes its shard of AdamW's state, before rank 0 writes the file
        // that completes the checkpoint; across nodes the shards are gathered for rank 0 (collective).
        train::OptimizerState optimizer;
        if (!opt.shard().covers(params.size()) && dist::local_world_size() == dist::world_size()) {
            train::save_optimizer_shard(keeper.step_path(st.step), opt, params, dist::rank(), dist::world_size());
            dist::barrier();
            optimizer = {.steps = opt.steps_taken(), .shards = dist::world_size()};
        } else {
            optimizer = train::whole_state(opt, params);
        }
        std::optional<double> metric;
        if (eval && eval->count(keeper.best_metric())) metric = eval->at(keeper.best_metric());
        if (dist::is_main())
            keeper.save(st.step, metric, [&](const std::filesystem::path& path) {
                nlohmann::json meta = {{"recipe", recipe}, {"config", cfg.to_json()}, {"grad_accum", grad_accum}};
                if (module) meta["model_state"] = module->save_state();
                train::save_train_state(path, meta, params, optimizer, st, states);
            });
        dist::barrier();
    };
}

// The run's result: the loop's figures, every rank's peak resident memory
// (for the benchmarks; a collective), the evaluations, early stopping.
Result loop_result(const LoopSpec& spec, const LoopResult& run, const ParamSet& params) {
    const auto world = static_cast<std::size_t>(dist::world_size()), me = static_cast<std::size_t>(dist::rank());
    std::vector<double> peak_mb(world, 0.0), state_mb(world, 0.0), grads_mb(world, 0.0), tensors_mb(world, 0.0);
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    peak_mb[me] = static_cast<double>(usage.ru_maxrss) / 1024.0;
    tensors_mb[me] = static_cast<double>(run.peak_tensor_bytes) / (1 << 20);
    const double mb = static_cast<double>(size_of(params.dtype())) / (1 << 20);
    state_mb[me] = static_cast<double>(run.optimizer_state_elements) * mb;
    grads_mb[me] = static_cast<double>(run.averaged_gradient_elements) * static_cast<double>(size_of(params.grad_dtype())) / (1 << 20);
    dist::all_reduce_sum(peak_mb);
    dist::all_reduce_sum(state_mb);
    dist::all_reduce_sum(grads_mb);
    dist::all_reduce_sum(tensors_mb);

    Result out = {{"loss", run.loss},
                  {"trainable_parameters", params.size()},
                  {"peak_rss_mb", peak_mb},
                  {"peak_memory_mb", tensors_mb},  // tensors on the device through the first step: what a plan predicts
                  {"optimizer_state_mb", state_mb},    // AdamW's moments each rank keeps
                  {"averaged_gradients_mb", grads_mb},  // the gradients averaged for each rank's update
                  {"steps", run.steps},
                  {"seconds", run.seconds},
                  {"items_per_second", run.items_per_second},
                  {"ranks", dist::world_size()},
                  {"time_split", {{"compute_s", run.compute_seconds},
                                  {"communication_s", run.communication_seconds},
                                  {"waiting_s", run.waiting_seconds},
                                  {"hidden_communication_s", run.hidden_communication_seconds}}}};
    for (const auto& [name, value] : run.last_eval) out[name] = value;
    for (const auto& [name, value] : run.first_eval) out[name + "_at_start"] = value;
    if (!spec.early_stop.metric.empty()) {
        out["stopped_early"] = run.stopped_early;
        out["best_step"] = run.best_step;
        out["best_" + spec.early_stop.metric] = run.best_metric;
    }
    return out;
}

Result train_on(const std::string& recipe, const LoopSpec& spec, const Config& cfg, Device device, bool& stepped) {
    Built built = build(recipe, spec, cfg, device);
    void* model = built.model.get();
    void* data = built.data.get();
    nn::Module* module = built.module;
    ParamSet& params = spec.params_of(model);

    train::LoopOptions options = framework_loop_options(spec, cfg);
    options.live_progress = live_progress_mode();
    train::TrainState resumed;
    const RunContext& run_context = cfg.run();
    if (!run_context.resume.empty())
        resume(recipe, spec, run_context.resume, model, params, data, options, resumed);

    const std::filesystem::path& dir = run_context.dir;
    std::optional<train::MetricsLog> metrics = open_metrics(dir, options.start.step);
    options.metrics = metrics ? &*metrics : nullptr;

    std::optional<CheckpointKeeper> keeper;
    AfterStep checkpoint;
    if (const long every = cfg[settings::checkpoint_every]; every > 0) {
        LEVERS_CHECK(!dir.empty(), "recipe '{}' writes checkpoints, but this run has no run directory", recipe);
        const std::string best = spec.best_metric.empty() ? spec.early_stop.metric : spec.best_metric;
        const bool maximize = spec.best_metric.empty() ? spec.early_stop.maximize : spec.best_maximize;
        keeper.emplace(dir, spec.keep_last, best, maximize);
        checkpoint = checkpoint_every(every, options.steps, options.grad_accum, *keeper, recipe, spec, cfg, module,
                                      params, data, options.metrics);
    }
    // `stepped`: a step ran, so --device auto may no longer fall back to the CPU.
    // On another GPU count, the first step shows whether the global batch held (a recipe whose batch per
    // rank follows the GPU count would see other data): stopped before that step's checkpoint.
    const bool regrouped = !run_context.resume.empty() && resumed.world_size != dist::world_size() &&
                           resumed.grad_accum > 0 && resumed.loop.step > 0;
    options.after_step = [&](const train::LoopState& st, const train::AdamW& opt, const Metrics* eval) {
        if (regrouped && st.step == resumed.loop.step + 1) {
            const std::int64_t was = resumed.loop.items / resumed.loop.step, now = st.items - resumed.loop.items;
            LEVERS_CHECK(now == was, "resumed on {} rank{}, a step trained {} {} where the {}-rank run trained {}: "
                         "recipe '{}' sizes its batch by the GPU count, so the data would differ; resume on {} "
                         "ranks", dist::world_size(), dist::world_size() == 1 ? "" : "s", now, options.unit,
                         resumed.world_size, was, recipe, resumed.world_size);
        }
        stepped = true;
        if (checkpoint) checkpoint(st, opt, eval);
    };

    // Evaluation and the finish run in inference mode, the model in evaluation mode.
    auto evaluating = [&](auto&& fn) {
        autograd::InferenceMode inference;
        if (module) module->eval();
        auto out = fn();
        if (module) module->train();
        return out;
    };
    std::function<Metrics(long)> evaluate;
    if (spec.evaluate) evaluate = [&](long) { return evaluating([&] { return spec.evaluate(model, data); }); };
    auto step = [&](long s, long micro) { return spec.step(model, data, StepInfo{s, micro}); };

    const LoopResult run = train::train_loop(params, options, step, evaluate);
    Result out = loop_result(spec, run, params);
    if (!run_context.resume.empty()) out["resumed_from"] = run_context.resume.string();
    if (spec.finish) {
        const Result extra = evaluating([&] { return spec.finish(model, data, run, cfg); });
        LEVERS_CHECK(extra.is_null() || extra.is_object(), "recipe '{}': .finish returned {} JSON; it adds fields "
                     "to the result, so return an object (or nothing: Result{{}})", recipe, extra.type_name());
        if (extra.is_object()) out.update(extra);
    }
    return out;
}

}  // namespace
}  // namespace levers

#include "levers/app/plan_command.hpp"

#include "levers/app/command.hpp"
#include "levers/app/run_config.hpp"
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/shape_trace.hpp"
#include "levers/recipe/device_choice.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace levers {

namespace {

// Where a plan is for: --device cuda needs no GPU here (the GPU's kernels are
// chosen as they would be there), only its memory, from a GPU or --memory.
PlanTarget plan_target(const PlanFlags& flags, const Recipe& r) {
    PlanTarget t;
    t.ranks = flags.gpus.value_or(r.default_gpus());
    LEVERS_CHECK(t.ranks >= 1, "--gpus must be >= 1, got {}", t.ranks);
    const auto named = kind_named(flags.device);
    LEVERS_CHECK(flags.device == "auto" || named, "--device must be auto, cpu or cuda, got '{}'", flags.device);
    t.device = named ? *named : (gpu_count() > 0 ? Device::Kind::cuda : Device::Kind::cpu);
    if (t.device == Device::Kind::cuda)
        LEVERS_CHECK(built_with_cuda(), "--device cuda: this build of levers has no CUDA backend (nvcc was not found "
                     "when it was configured), so it cannot lay a model out as a GPU would; plan with --device cpu");
    t.compute = resolve_precision(flags.precision, t.device);
    if (!flags.memory.empty()) t.memory = parse_memory_size(flags.memory);
    return t;
}

}  // namespace

int print_plan(const PlanFlags& flags) {
    const Recipe r = find_recipe(flags.name);
    Config cfg = resolve_config(r, flags.sets);
    {
        // The recipe's checks on shapes alone too: a model directory may be a config.json without its weights.
        ShapeTrace shapes;
        r.check(cfg);
    }
    const MemoryPlan plan = plan_memory(r, cfg, plan_target(flags, r));
    fmt::print("{}", plan_text(plan));
    return 0;
}

bool take_auto_micro_batch(std::vector<std::string>& sets) {
    const auto it = std::find(sets.begin(), sets.end(), std::string("micro_batch=auto"));
    if (it == sets.end()) return false;
    sets.erase(it);
    return true;
}

long choose_micro_batch(const Recipe& recipe, Config& cfg, const PlanTarget& target) {
    const MemoryPlan plan = plan_memory(recipe, cfg, target, true);
    const MemoryPlan::Fit& f = *plan.fit(plan.zero, plan.checkpointing);  // planned: only_configured
    LEVERS_CHECK(f.micro_batch > 0, "--set micro_batch=auto: not even a micro-batch of 1 fits {} per rank "
                 "(usable of {}):\n{}", memory_text(double(plan.usable)), memory_text(double(plan.capacity)),
                 plan_text(plan));
    cfg.set(plan.micro_batch_param, std::to_string(f.micro_batch));
    if (cfg.has(settings::grad_accum.name()))  // the recipe's own setting agrees
        cfg.set(settings::grad_accum.name(), std::to_string(f.grad_accum));
    fmt::print("micro_batch=auto: {}={} x grad_accum {} ({} samples per step and rank, as configured), planned "
               "peak {} per rank of {} usable\n", plan.micro_batch_param, f.micro_batch, f.grad_accum,
               plan.micro_batch * plan.grad_accum, memory_text(double(f.peak)),
               memory_text(double(plan.usable)));
    return f.grad_accum;
}

namespace {

class PlanCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* plan = command_ = app.add_subcommand("plan", "A run's memory per rank before it starts: weights, "
                                                           "gradients, optimizer state, activations, and the largest "
                                                           "micro-batch that fits");
        plan->add_option("name", flags_.name, "recipe name")->required();
        plan->add_option("--set", flags_.sets, "set a parameter: --set name=value (repeatable)");
        plan->add_option("--gpus", flags_.gpus, "ranks, one GPU each (default: the recipe's)");
        plan->add_option("--device", flags_.device, "where the ranks would compute: auto, cpu or cuda (cuda needs "
                                                    "no GPU here, only its memory: from a GPU, or --memory)")
            ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
        add_precision_option(*plan, flags_.precision, "what they would compute in");
        plan->add_option("--memory", flags_.memory, "each rank's memory, e.g. 80GB (default: the GPU's, or the "
                                                    "CPU's available memory shared by the ranks)");
        plan->footer(ex("\nExamples:\n  {recipe} plan {pretrain} --gpus 4\n"
                        "  {recipe} plan {pretrain} --gpus 8 --device cuda --memory 80GB --precision bf16 --set zero=2\n"
                        "  {recipe} run {pretrain} --gpus 4 --set micro_batch=auto"));
    }
    int run(int, char**) override { return print_plan(flags_); }

private:
    PlanFlags flags_;
};

}  // namespace

std::unique_ptr<Command> plan_command() { return std::make_unique<PlanCommand>(); }

}  // namespace levers

// `recipe bench scaling|shapes|predict` on the command line.
#include "levers/app/bench/bench_commands.hpp"
#include "levers/app/command.hpp"
#include "levers/core/error.hpp"
#include "levers/recipe/config.hpp"

namespace levers {

namespace {

class BenchCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override;
    int run(int argc, char** argv) override;

private:
    CLI::App *scaling_ = nullptr, *shapes_ = nullptr, *predict_ = nullptr;
    bench::ScalingFlags scaling_flags_;
    bench::ShapesFlags shapes_flags_;
    bench::PredictFlags predict_flags_;
    std::string scaling_gpus_, predict_gpus_;  // "1,2,4" as given
    bool seeds_ = false;
};

void BenchCommand::add_to(CLI::App& app, const Examples& ex) {
    auto* bench_ = command_ = app.add_subcommand("bench", "Measure how a recipe scales over GPUs, compare sweeps with multi-GPU "
                                         "runs, predict real nodes");
    bench_->require_subcommand(1);

    auto& s = scaling_flags_;
    scaling_ = bench_->add_subcommand("scaling", "Throughput, speedup, efficiency and time split at each GPU count");
    scaling_->add_option("name", s.recipe, "recipe name")->required();
    // Lists are parsed here, not by CLI11, which drops empty items ("1,,2").
    scaling_->add_option("--gpus", scaling_gpus_, "GPU counts, e.g. 1,2,4,8 (default: powers of two up to the node's)");
    scaling_->add_option("--steps", s.steps, "steps per run (default 60)");
    scaling_->add_option("--warmup", s.warmup, "steps left out of the throughput (default 10)");
    scaling_->add_option("--set", s.sets, "a recipe parameter for every run: --set name=value");
    scaling_->add_option("--global-batch", s.global_batch, "keep this global batch at every count (default: the "
                                                           "same batch per GPU)");
    scaling_->add_option("--threads", s.threads, "CPU threads per rank (default 1: one core per GPU)");
    scaling_->add_option("--price", s.price, "price per GPU-hour: adds the time and cost of the work");
    scaling_->add_option("--total-steps", s.total_steps, "one GPU's steps to price (default: the recipe's steps)");
    scaling_->add_option("--out", s.out, "results directory (default: runs/NAME/bench-scaling-<date-time>)");
    add_precision_option(*scaling_, s.precision, "what every run computes in");
    scaling_->footer(ex("\nExamples:\n  {recipe} bench scaling {pretrain} --gpus 1,2 --steps 80\n"
                        "  {recipe} bench scaling {classify} --gpus 1,2,4,8 --global-batch 512 --price 0.68"));

    auto& h = shapes_flags_;
    shapes_ = bench_->add_subcommand("shapes", "K one-GPU cells as a sweep against one K-GPU run of the same work");
    shapes_->add_option("name", h.recipe, "recipe name")->required();
    shapes_->add_option("--cells", h.cells, "K (default 2)");
    shapes_->add_option("--steps", h.steps, "steps of every run (default 60)");
    shapes_->add_option("--set", h.sets, "a recipe parameter for every run");
    shapes_->add_option("--out", h.out, "results directory");
    shapes_->footer(ex("\nExample:\n  {recipe} bench shapes {classify} --cells 2 --steps 2000"));

    auto& p = predict_flags_;
    predict_ = bench_->add_subcommand("predict", "Predict the speedup on real GPUs from one GPU's step, the "
                                                 "gradient bytes and an interconnect");
    predict_->add_option("name", p.recipe, "recipe name (measured: its step time, gradients and overlap)");
    predict_->add_option("--profile", p.profile, "nvlink-h100, pcie5-p2p or pcie-nop2p (default)");
    predict_->add_option("--gpus", predict_gpus_, "GPU counts (default 2,4,8)");
    predict_->add_option("--bandwidth", p.bandwidth_gb_s, "GB/s per GPU, instead of the profile's");
    predict_->add_option("--latency", p.latency_us, "microseconds per ring hop, instead of the profile's");
    predict_->add_option("--step-ms", p.step_ms, "one GPU's step in ms, instead of measuring it");
    predict_->add_option("--grad-mb", p.grad_mb, "MiB of gradients per step, instead of 4 x the trained parameters");
    predict_->add_option("--overlap", p.overlap, "share of communication hidden, 0..1, instead of measuring it");
    predict_->add_flag("--bf16-gradients", p.bf16_gradients, "halve the gradient bytes");
    predict_->add_flag("--global-batch", p.fixed_global_batch, "the total work split over the GPUs (default: the "
                                                               "same batch per GPU)");
    predict_->add_option("--set", p.sets, "a recipe parameter for the measuring runs");
    predict_->add_option("--out", p.out, "results directory");
    predict_->add_flag("--seeds", seeds_, "the seeds' measured fine-tune against the model (no recipe needed)");
    predict_->footer(ex("\nExamples:\n  {recipe} bench predict {pretrain} --profile pcie-nop2p --gpus 2,4,8\n"
                        "  {recipe} bench predict {pretrain} --profile nvlink-h100 --step-ms 350 --grad-mb 475\n"
                        "  {recipe} bench predict --seeds"));
}

int BenchCommand::run(int, char**) {
    if (scaling_->parsed()) {
        bench::ScalingFlags s = scaling_flags_;
        if (scaling_->count("--gpus") > 0) s.gpus = parse_int_list("--gpus", scaling_gpus_, 1);
        return bench::bench_scaling(s);
    }
    if (shapes_->parsed()) return bench::bench_shapes(shapes_flags_);
    if (seeds_) return bench::bench_predict_seeds();
    LEVERS_CHECK(!predict_flags_.recipe.empty(), "recipe bench predict needs a recipe name (or --seeds)");
    bench::PredictFlags p = predict_flags_;
    if (predict_->count("--gpus") > 0) p.gpus = parse_int_list("--gpus", predict_gpus_, 1);
    return bench::bench_predict(p);
}

}  // namespace

std::unique_ptr<Command> bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace levers

#include "levers/recipe/memory_plan.hpp"

#include "levers/core/device_runtime.hpp"
#include "levers/core/error.hpp"
#include "levers/core/shape_trace.hpp"
#include "levers/distributed/data_parallel.hpp"
#include "levers/distributed/traced_group.hpp"
#include "levers/distributed/zero.hpp"
#include "levers/recipe/framework_loop.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>
#include <unistd.h>

namespace levers {

namespace {

// Stdout silenced while a trace builds the recipe's model and data (they announce themselves).
class QuietStdout {
public:
    QuietStdout() {
        std::fflush(stdout);
        saved_ = ::dup(1);
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) {
            ::dup2(null, 1);
            ::close(null);
        }
    }
    ~QuietStdout() {
        std::fflush(stdout);
        if (saved_ >= 0) {
            ::dup2(saved_, 1);
            ::close(saved_);
        }
    }
    QuietStdout(const QuietStdout&) = delete;
    QuietStdout& operator=(const QuietStdout&) = delete;

private:
    int saved_ = -1;
};

// One traced step: what the target device held when the model and data were
// built (and at most while building), and at most during the step.
struct Traced {
    std::size_t built = 0, build_peak = 0, step_peak = 0;
    std::size_t gradients = 0;  // the whole flat gradient buffer (not made under ZeRO-2)
    // Under ZeRO-2: held once its ParamSync is made (the master values sharded where the set has a compute
    // copy), and at most while it was made. Else `built`.
    std::size_t step_start = 0, sync_peak = 0;
    // Filled when asked: per stage, AdamW's state; the largest shard of ZeRO-2's gradients; and, where the
    // set computes from a copy in another dtype, the bytes of master values ZeRO does not keep and those it does.
    std::size_t optimizer[3] = {}, shard_gradients = 0, masters_dropped = 0, masters_kept = 0;
};

Device target_device(const PlanTarget& t) { return t.device == Device::Kind::cpu ? Device::cpu() : Device::cuda(0); }

// The gradient buckets' size in elements at `zero`, as dist::ParamSync cuts them.
std::int64_t bucket_elems(const ParamSet& params, int zero, int ranks, std::int64_t bucket_bytes) {
    const auto elem = static_cast<std::int64_t>(size_of(params.grad_dtype()));
    const std::int64_t b = std::max<std::int64_t>(1, bucket_bytes / elem);
    return zero > 0 && ranks > 1 ? dist::shard_bucket_elems(b, ranks) : b;
}

// The rank whose ZeRO shard is the largest (the first of equals).
int largest_shard_rank(const ParamSet& params, int ranks, std::int64_t bucket_bytes) {
    const std::int64_t bucket = bucket_elems(params, 2, ranks, bucket_bytes);
    int best = 0;
    std::int64_t most = -1;
    for (int r = 0; r < ranks; ++r)
        if (const std::int64_t n = dist::bucket_shard(params.size(), bucket, ranks, r).size(); n > most) {
            most = n;
            best = r;
        }
    return best;
}

// The largest shard any rank keeps at `zero`.
FlatShard largest_shard(const ParamSet& params, int zero, int ranks, std::int64_t bucket_bytes) {
    if (zero == 0 || ranks < 2) return FlatShard::whole(params.size());
    return dist::bucket_shard(params.size(), bucket_elems(params, zero, ranks, bucket_bytes), ranks,
                              largest_shard_rank(params, ranks, bucket_bytes));
}

// AdamW's persistent bytes for the largest shard any rank keeps at `zero`.
std::size_t optimizer_bytes(ParamSet& params, MemoryLedger& ledger, int zero, int ranks, std::int64_t bucket_bytes) {
    const std::size_t before = ledger.held();
    const train::AdamW opt(params, {}, largest_shard(params, zero, ranks, bucket_bytes));
    return ledger.held() - before;
}

// One traced step. `zero2` (with more than one rank): the step runs under
// ZeRO-2's own gradient machinery (dist::ParamSync) over a group that
// carries nothing, as the rank with the largest shard, so its shard and
// the buckets backward fills and frees are traced as the run makes them.
Traced trace_step(const LoopSpec& spec, Config cfg, const PlanTarget& target, long micro, bool checkpointing,
                  bool zero2, bool with_optimizer, std::int64_t bucket_bytes) {
    cfg.set(spec.micro_batch, std::to_string(micro));
    if (!spec.checkpointing.empty()) cfg.set(spec.checkpointing, checkpointing ? "true" : "false");
    const Device device = target_device(target);
    Traced t;
    ShapeTrace trace;
    MemoryLedger& held = trace.memory(device.kind);
    LoopSpec::Erased model, data;
    {
        QuietStdout quiet;
        model = spec.make_model(cfg);
        if (!device.is_cpu()) {
            LEVERS_CHECK(spec.to_device, "its model type has no to(Device, DType), so it runs on the CPU only");
            spec.to_device(model.get(), device, target.compute);
        }
        data = spec.make_data(cfg);
    }
    ParamSet& params = spec.params_of(model.get());
    t.build_peak = held.peak();  // before the gradients' buffer, which a run makes at its first use (ZeRO-2: never)
    const std::size_t width = size_of(params.grad_dtype());
    t.gradients = params.has_grads() ? static_cast<std::size_t>(params.size()) * width : 0;
    zero2 = zero2 && target.ranks > 1 && params.has_grads();
    if (!zero2 && params.has_grads()) params.grads();  // made, as a run's first backward makes them
    t.built = held.held();
    if (with_optimizer && params.has_grads()) {
        for (int zero = 0; zero <= 2; ++zero)
            t.optimizer[zero] = optimizer_bytes(params, held, zero, target.ranks, bucket_bytes);
        const auto shard = static_cast<std::size_t>(largest_shard(params, 2, target.ranks, bucket_bytes).size());
        t.shard_gradients = shard * width;
        if (params.compute_dtype() != params.dtype() && target.ranks > 1) {
            const std::size_t master = size_of(params.dtype());
            t.masters_kept = shard * master;
            t.masters_dropped = (static_cast<std::size_t>(params.size()) - shard) * master;
        }
    }
    held.reset_peak();
    t.step_start = t.sync_peak = t.built;
    {
        QuietStdout quiet;
        if (zero2) {
            dist::TracedGroup group(largest_shard_rank(params, target.ranks, bucket_bytes), target.ranks);
            dist::ParamSync sync(params, bucket_bytes, 2, &group);
            t.step_start = held.held();
            t.sync_peak = held.peak();
            held.reset_peak();
            sync.arm();
            spec.step(model.get(), data.get(), StepInfo{});
            sync.finish();
        } else {
            spec.step(model.get(), data.get(), StepInfo{});
        }
    }
    t.step_peak = held.peak();
    return t;
}

// This machine's memory per rank: the GPU's, or the CPU's available memory shared by the ranks.
std::size_t machine_memory(const PlanTarget& target) {
    if (target.device == Device::Kind::cuda) {
        DeviceRuntime* rt = device_runtime();
        LEVERS_CHECK(rt != nullptr && rt->count() > 0, "no GPU here to read its memory from ({}); give --memory, e.g. "
                     "--memory 80GB", rt ? "the runtime sees none" : device_backend_error());
        std::size_t free_bytes = 0, total = 0;
        rt->memory_info(free_bytes, total);
        return total;
    }
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::size_t kb = 0;
    std::string unit;
    while (meminfo >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024 / static_cast<std::size_t>(target.ranks);
    LEVERS_FAIL("cannot read the available memory from /proc/meminfo; give --memory, e.g. --memory 16GB");
}

// The largest micro-batch up to `limit` whose traced peak is within `budget`,
// to within a 64th. The peak is not linear in the micro-batch at small ones
// (a chunked loss holds a fixed chunk; the pools round to size classes), so
// the search takes the slope between its last two traces: growing at most
// eightfold while they fit, then narrowing the bracket, secant and halving in
// turn, each guess a trace.
long largest_fitting(const std::function<std::size_t(long)>& peak_at, std::size_t budget, long limit) {
    if (peak_at(1) > budget) return 0;
    long lo = 1, hi = 0, prev = 0;  // lo fits, hi (once known) does not
    for (int turn = 0; turn < 24 && lo < limit; ++turn) {
        if (hi > 0 && hi - lo <= std::max<long>(1, lo / 64)) break;
        const long other = hi > 0 ? hi : prev;
        long next = lo * 2;
        if (other > 0 && (hi == 0 || turn % 2 == 0)) {
            const double slope = (double(peak_at(other)) - double(peak_at(lo))) / double(other - lo);
            if (slope > 0) next = lo + static_cast<long>(double(budget - peak_at(lo)) / slope);
        } else if (hi > 0) {
            next = lo + (hi - lo) / 2;
        }
        next = std::clamp(next, lo + 1, hi > 0 ? hi - 1 : std::min(limit, lo * 8));
        if (peak_at(next) <= budget) {
            prev = lo;
            lo = next;
        } else {
            hi = next;
        }
    }
    return lo;
}

}  // namespace

const MemoryPlan::Fit* MemoryPlan::fit(int zero_stage, bool checkpointing_on) const {
    for (const Fit& f : fits)
        if (f.zero == zero_stage && f.checkpointing == checkpointing_on) return &f;
    return nullptr;
}

MemoryPlan plan_memory(const Recipe& recipe, const Config& cfg, const PlanTarget& target, bool only_configured) {
    const LoopSpec* spec = recipe.loop_spec();
    LEVERS_CHECK(spec != nullptr, "recipe '{}' owns its loop (.run): levers cannot trace its step to plan its memory",
                 recipe.name());
    return plan_memory(recipe.name(), *spec, cfg, target, only_configured);
}

namespace {

// The traces a plan takes, each once, by micro-batch, checkpointing and
// whether ZeRO-2 shards the gradients (its step holds other memory), and the
// peaks a run would reach from them.
class Planner {
public:
    Planner(const LoopSpec& spec, const Config& cfg, const PlanTarget& target, std::int64_t bucket_bytes)
        : spec_(spec), cfg_(cfg), target_(target), bucket_bytes_(bucket_bytes) {}

    const Traced& at(long micro, bool ckpt, bool zero2 = false) {
        zero2 = zero2 && target_.ranks > 1;
        auto it = traced_.find({micro, ckpt, zero2});
        if (it == traced_.end())  // the first trace also weighs AdamW's state per stage
            it = traced_.emplace(std::tuple{micro, ckpt, zero2},
                                 trace_step(spec_, cfg_, target_, micro, ckpt, zero2, traced_.empty(), bucket_bytes_))
                     .first;
        return it->second;
    }

    // The stages' figures from the configured trace: what is held before a step.
    void stages(MemoryPlan& plan) {
        const Traced& t = at(plan.micro_batch, plan.checkpointing);
        masters_dropped_ = t.masters_dropped;
        masters_kept_ = t.masters_kept;
        for (int zero = 0; zero <= 2; ++zero) {
            MemoryPlan::Stage& s = plan.stages[zero];
            s.weights = t.built - t.gradients - (zero > 0 ? t.masters_dropped : 0);  // ZeRO: the shard's masters
            s.gradients = zero == 2 && target_.ranks > 1 ? t.shard_gradients : t.gradients;
            s.optimizer = t.optimizer[zero];
            optimizer_[zero] = s.optimizer;
        }
        if (target_.ranks > 1) {  // what ZeRO-2's step adds beyond DDP's activations and its shard: the buckets
            const Traced& z2 = at(plan.micro_batch, plan.checkpointing, true);
            const double more = (double(z2.step_peak) - double(z2.step_start)) -
                                (double(t.step_peak) - double(t.built)) - double(plan.stages[2].gradients);
            plan.stages[2].grad_buckets = static_cast<std::size_t>(std::max(0.0, more));
        }
    }

    // A run's peak at `micro` under `zero` (after stages()): the most of building it and of its step with the
    // optimizer's state beside; where ZeRO shards the master values, also of sharding them (the whole and the
    // shard, at the start) and of gathering them whole again once the loop ends (the shard and the whole, the
    // optimizer's state and gradients gone). A ZeRO-2 trace holds the sharded masters already; ZeRO-1's takes
    // DDP's trace, less the masters it drops.
    std::size_t run_peak(long micro, bool ckpt, int zero) {
        const Traced& t = at(micro, ckpt, zero == 2);
        std::size_t peak = std::max(t.build_peak, t.sync_peak);
        if (zero == 1 && masters_dropped_ > 0) peak = std::max(peak, t.built - t.gradients + masters_kept_);
        const std::size_t step = zero == 1 ? t.step_peak - masters_dropped_ : t.step_peak;
        return std::max(peak, step + optimizer_[zero]);
    }
    // The same while searching: a micro-batch the recipe refuses (its data has too few rows for it) counts as not
    // fitting, max(), and bounds the search.
    std::size_t peak(long micro, bool ckpt, int zero) {
        if (micro > data_limit_) return std::numeric_limits<std::size_t>::max();
        try {
            return run_peak(micro, ckpt, zero);
        } catch (const Error&) {
            data_limit_ = micro - 1;
            return std::numeric_limits<std::size_t>::max();
        }
    }

    // At the configured micro-batch m: what its step adds, and the slope to 2m (none where 2m is refused: all fixed).
    MemoryPlan::Activations activations(long m, bool ckpt) {
        MemoryPlan::Activations a;
        const Traced& one = at(m, ckpt);
        if (peak(2 * m, ckpt, 0) != std::numeric_limits<std::size_t>::max())
            a.per_sample = (double(at(2 * m, ckpt).step_peak) - double(one.step_peak)) / double(m);
        a.fixed = std::max(0.0, double(one.step_peak - one.built) - a.per_sample * double(m));
        return a;
    }

    // The largest micro-batch that fits `plan.usable` per stage and checkpointing, and the divisor of the samples
    // per step and rank that keeps them; only the configured pair where `only_configured`.
    std::vector<MemoryPlan::Fit> fits(const MemoryPlan& plan, bool only_configured) {
        const long per_rank = plan.micro_batch * plan.grad_accum;
        const long limit = std::max<long>(65536, per_rank);
        std::map<std::tuple<bool, std::size_t, bool>, long> largest;  // stages may agree: same bytes, same answer
        std::vector<MemoryPlan::Fit> out;
        for (bool ckpt : {false, true}) {
            if (ckpt && !plan.can_checkpoint) continue;
            for (int zero = 0; zero <= 2; ++zero) {
                if (only_configured && (ckpt != plan.checkpointing || zero != plan.zero)) continue;
                MemoryPlan::Fit f{.zero = zero, .checkpointing = ckpt};
                auto [it, fresh] = largest.try_emplace({ckpt, optimizer_[zero], zero == 2}, 0);
                if (fresh) it->second = largest_fitting([&](long m) { return peak(m, ckpt, zero); }, plan.usable, limit);
                f.largest = it->second;
                f.capped = f.largest == limit ||
                           (data_limit_ < limit && f.largest + std::max<long>(1, f.largest / 64) >= data_limit_);
                for (long d = std::min(f.largest, per_rank); d >= 1; --d)
                    if (per_rank % d == 0) {
                        f.micro_batch = d;
                        f.grad_accum = per_rank / d;
                        f.peak = peak(d, ckpt, zero);
                        break;
                    }
                out.push_back(f);
            }
        }
        return out;
    }

private:
    const LoopSpec& spec_;
    const Config& cfg_;
    const PlanTarget& target_;
    const std::int64_t bucket_bytes_;
    std::map<std::tuple<long, bool, bool>, Traced> traced_;
    std::size_t masters_dropped_ = 0, masters_kept_ = 0, optimizer_[3] = {};
    long data_limit_ = std::numeric_limits<long>::max();
};

// The plan's header: the target's memory, the run as configured.
MemoryPlan configured_plan(const std::string& name, const LoopSpec& spec, const Config& cfg, const PlanTarget& target,
                           const train::LoopOptions& options) {
    MemoryPlan plan;
    plan.recipe = name;
    plan.micro_batch_param = spec.micro_batch;
    plan.target = target;
    plan.capacity = target.memory > 0 ? target.memory : machine_memory(target);
    // The reserve: a tenth, and on a GPU cuBLASLt's workspace (levers/kernels/cuda/linear_lt.cu), which no tensor holds.
    const std::size_t workspace = target.device == Device::Kind::cuda ? std::size_t{32} << 20 : 0;
    plan.usable = plan.capacity - std::min(plan.capacity, plan.capacity / 10 + workspace);
    plan.micro_batch = std::get<long>(cfg.value(spec.micro_batch));
    plan.grad_accum = options.grad_accum;
    plan.zero = options.zero;
    plan.can_checkpoint = !spec.checkpointing.empty();
    plan.checkpointing = plan.can_checkpoint && cfg[settings::checkpointing];
    return plan;
}

}  // namespace

MemoryPlan plan_memory(const std::string& name, const LoopSpec& spec, const Config& cfg, const PlanTarget& target,
                       bool only_configured) {
    LEVERS_CHECK(!spec.micro_batch.empty(), "recipe '{}' declares no batch size (.training({{.batch_size = N}})), so "
                 "there is nothing to plan", name);
    LEVERS_CHECK(target.ranks >= 1, "--gpus must be >= 1, got {}", target.ranks);
    const train::LoopOptions options = framework_loop_options(spec, cfg);
    MemoryPlan plan = configured_plan(name, spec, cfg, target, options);
    Planner planner(spec, cfg, target, options.bucket_bytes);
    planner.stages(plan);
    plan.peak = planner.run_peak(plan.micro_batch, plan.checkpointing, plan.zero);
    plan.keeping = planner.activations(plan.micro_batch, false);
    if (plan.can_checkpoint) plan.checkpointed = planner.activations(plan.micro_batch, true);
    plan.fits = planner.fits(plan, only_configured);
    return plan;
}

std::string memory_text(double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
    return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
}

std::size_t parse_memory_size(const std::string& text) {
    std::size_t pos = 0;
    double value = 0;
    try {
        value = std::stod(text, &pos);
    } catch (const std::exception&) {
        pos = 0;
    }
    std::string unit;
    for (std::size_t i = pos; i < text.size(); ++i)
        if (!std::isspace(static_cast<unsigned char>(text[i])))
            unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    const std::map<std::string, double> units = {{"B", 1.0},         {"KB", 1024.0},     {"KIB", 1024.0},
                                                 {"MB", 1048576.0},  {"MIB", 1048576.0}, {"GB", 1073741824.0},
                                                 {"GIB", 1073741824.0}, {"TB", 1099511627776.0},
                                                 {"TIB", 1099511627776.0}};
    const auto it = units.find(unit);
    LEVERS_CHECK(pos > 0 && value > 0 && std::isfinite(value) && it != units.end(),
                 "--memory {}: give a size such as 80GB, 141GiB or 512MB", text);
    return static_cast<std::size_t>(value * it->second);
}

std::string plan_text(const MemoryPlan& p) {
    const bool cuda = p.target.device == Device::Kind::cuda;
    std::string out = fmt::format(
        "memory plan for {} on {} {} rank{}{}: {} per rank, {} usable (a tenth kept for what tensors do not "
        "hold: runtime, libraries, communication buffers{})\n",
        p.recipe, p.target.ranks, cuda ? "cuda" : "cpu", p.target.ranks == 1 ? "" : "s",
        cuda ? fmt::format(" computing in {}", name_of(p.target.compute)) : "", memory_text(double(p.capacity)),
        memory_text(double(p.usable)), cuda ? "; and cuBLASLt's 32 MiB workspace" : "");
    out += fmt::format("per rank{:>20}{:>14}{:>14}\n", "DDP", "ZeRO-1", "ZeRO-2");
    auto row = [&](const char* what, const std::array<double, 3>& by_stage) {
        out += fmt::format("  {:<18}{:>14}{:>14}{:>14}\n", what, memory_text(by_stage[0]), memory_text(by_stage[1]),
                           memory_text(by_stage[2]));
    };
    auto figure = [&](std::size_t MemoryPlan::Stage::*field) {
        return std::array{double(p.stages[0].*field), double(p.stages[1].*field), double(p.stages[2].*field)};
    };
    row("weights", figure(&MemoryPlan::Stage::weights));
    row("gradients", figure(&MemoryPlan::Stage::gradients));
    if (p.stages[2].grad_buckets > 0)
        out += fmt::format("  {:<18}{:>14}{:>14}{:>14}\n", "  + in backward", "-", "-",
                           memory_text(double(p.stages[2].grad_buckets)));
    row("optimizer state", figure(&MemoryPlan::Stage::optimizer));
    for (bool c : {false, true}) {
        if (c && !p.can_checkpoint) continue;
        out += fmt::format("activations{}: {} per sample, {} fixed (the step's peak over what is held before it, "
                           "between {}={} and {})\n", c ? " with checkpointing" : "",
                           memory_text(p.activations(c).per_sample), memory_text(p.activations(c).fixed),
                           p.micro_batch_param, p.micro_batch, 2 * p.micro_batch);
    }
    const long per_rank = p.micro_batch * p.grad_accum;
    out += fmt::format("as configured ({}={}, grad_accum {}, checkpointing {}, zero {}): peak {} per rank, {}\n",
                       p.micro_batch_param, p.micro_batch, p.grad_accum, p.checkpointing ? "on" : "off", p.zero,
                       memory_text(double(p.peak)), p.peak <= p.usable ? "fits" : "does NOT fit");
    out += fmt::format("largest micro-batch that fits, and what keeps this run's {} samples per step and rank "
                       "(micro-batch x grad_accum):\n", per_rank);
    out += fmt::format("  {:<22}{:>16}{:>16}{:>16}\n", "", "DDP", "ZeRO-1", "ZeRO-2");
    for (int c = 0; c < (p.can_checkpoint ? 2 : 1); ++c) {
        out += fmt::format("  {:<22}", c ? "with checkpointing" : "keeping activations");
        for (int zero = 0; zero <= 2; ++zero) {
            const MemoryPlan::Fit* found = p.fit(zero, c == 1);
            if (!found) {
                out += fmt::format("{:>16}", "-");
                continue;
            }
            const MemoryPlan::Fit& f = *found;
            const std::string cell = f.largest == 0 ? "none"
                                     : fmt::format("{}{} ({}x{})", f.largest, f.capped ? "+" : "", f.micro_batch,
                                                   f.grad_accum);
            out += fmt::format("{:>16}", cell);
        }
        out += "\n";
    }
    return out;
}

}  // namespace levers

namespace levers {

std::string out_of_memory_advice(const MemoryPlan& p) {
    const auto& a = p.activations(p.checkpointing);
    const MemoryPlan::Stage& s = p.stage(p.zero);
    std::string out = fmt::format(
        "The memory plan for this run ({} {} rank{} of {}): weights {}, gradients {}, optimizer state {}, "
        "activations {} per sample and {} fixed; its peak {} per rank against {} usable.", p.target.ranks,
        p.target.device == Device::Kind::cuda ? "cuda" : "cpu", p.target.ranks == 1 ? "" : "s",
        memory_text(double(p.capacity)), memory_text(double(s.weights)), memory_text(double(s.gradients)),
        memory_text(double(s.optimizer)), memory_text(a.per_sample), memory_text(a.fixed),
        memory_text(double(p.peak)), memory_text(double(p.usable)));
    // The run's own settings first; another stage or checkpointing only where it fits a larger micro-batch.
    std::vector<MemoryPlan::Fit> fits = p.fits;
    std::stable_partition(fits.begin(), fits.end(),
                          [&](const MemoryPlan::Fit& f) { return f.zero == p.zero && f.checkpointing == p.checkpointing; });
    std::vector<std::string> changes;
    long best = 0;
    for (const MemoryPlan::Fit& f : fits) {
        if (f.micro_batch <= best) continue;
        best = f.micro_batch;
        std::string change = fmt::format("{}={}", p.micro_batch_param, f.micro_batch);
        if (f.grad_accum != p.grad_accum) change += fmt::format(" with grad_accum {}", f.grad_accum);
        if (f.checkpointing != p.checkpointing) change += fmt::format(" and --set checkpointing={}", f.checkpointing);
        if (f.zero != p.zero) change += fmt::format(" and --set zero={}", f.zero);
        if (std::find(changes.begin(), changes.end(), change) == changes.end()) changes.push_back(change);
    }
    if (changes.empty())
        return out + " Not even a micro-batch of 1 fits: more GPUs with --set zero=1 (AdamW's state shared), or a "
                     "GPU with more memory.";
    out += " What fits:";
    for (std::size_t i = 0; i < changes.size() && i < 4; ++i) out += (i ? "; " : " ") + changes[i];
    return out + ". --set micro_batch=auto picks the largest micro-batch that fits and keeps the samples per step "
                 "(`recipe plan " + p.recipe + "` prints the whole plan).";
}

}  // namespace levers

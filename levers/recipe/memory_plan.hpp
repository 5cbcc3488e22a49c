// `recipe plan`: what one training step of a recipe holds per rank, traced on
// shapes alone (levers/core/shape_trace.hpp: the recipe's own model, data
// and step run, nothing is computed, no full-size memory is touched), and the
// largest micro-batch that fits with and without activation checkpointing and
// ZeRO. The figures are the tensor memory a run reports as
// peak_memory_mb (levers/core/tensor_memory.hpp), so a plan can be checked
// against runs; what tensors do not hold (the CUDA context, libraries,
// communication buffers) is left to a reserve of a tenth of the memory.
//
// A recipe takes part by declaring its batch size (.training({.batch_size =
// N})) and, where it has one, .activation_checkpointing().
#pragma once

#include "levers/core/device.hpp"
#include "levers/core/dtype.hpp"
#include "levers/recipe/config.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace levers {

class Recipe;

// Where the job would run: its ranks, their device and dtype, and each rank's
// memory (0: this machine's: the GPU's total, or the CPU's available memory
// shared by the ranks).
struct PlanTarget {
    int ranks = 1;
    Device::Kind device = Device::Kind::cpu;
    DType compute = DType::f32;
    std::size_t memory = 0;
};

struct MemoryPlan {
    std::string recipe, micro_batch_param;  // the recipe and its micro-batch parameter
    PlanTarget target;
    std::size_t capacity = 0, usable = 0;   // per rank; usable keeps a tenth in reserve (and a workspace on GPUs)
    // What a rank holds under one way of sharing the optimizer (DDP, ZeRO-1, ZeRO-2).
    struct Stage {
        // The parameters (master and compute copies, frozen ones) and the
        // model's buffers; under ZeRO with a compute copy (bf16 on a GPU),
        // the masters of the largest shard only.
        std::size_t weights = 0;
        std::size_t gradients = 0;     // the flat buffer (DDP, ZeRO-1) or the largest shard (ZeRO-2)
        std::size_t grad_buckets = 0;  // ZeRO-2: what its step holds beyond DDP's activations and its shard (traced)
        std::size_t optimizer = 0;     // AdamW's moments (of the largest shard under ZeRO)
    };
    Stage stages[3];  // by ZeRO stage: DDP (0), ZeRO-1, ZeRO-2
    const Stage& stage(int zero_stage) const { return stages[zero_stage]; }
    long micro_batch = 0, grad_accum = 1;   // as configured: samples per step and rank = their product
    bool checkpointing = false, can_checkpoint = false;
    int zero = 0;
    // What a step holds above what is held before it, without and with
    // activation checkpointing: fixed plus per sample, between the
    // configured micro-batch and twice it (a chunked loss is fixed memory).
    struct Activations {
        double fixed = 0, per_sample = 0;
    };
    Activations keeping, checkpointed;
    const Activations& activations(bool checkpointing_on) const { return checkpointing_on ? checkpointed : keeping; }
    std::size_t peak = 0;  // the run as configured
    // The largest micro-batch that fits, and the one of the per-rank batch's
    // divisors that keeps it (grad_accum = samples per step and rank / it); 0: none fits.
    struct Fit {
        int zero = 0;
        bool checkpointing = false;
        long largest = 0, micro_batch = 0, grad_accum = 0;
        bool capped = false;     // `largest` is the search's limit or the data's (it has no more rows), not memory's
        std::size_t peak = 0;    // per rank at `micro_batch`
    };
    std::vector<Fit> fits;

    // The entry for a stage and checkpointing, or null where the plan has none (only_configured, below).
    const Fit* fit(int zero_stage, bool checkpointing_on) const;
};

// Traces the recipe's step as `cfg` configures it on `target`, and its
// micro-batches as far as memory allows: for every ZeRO stage with and
// without checkpointing, or only as configured (`only_configured`: fits
// holds that one). Throws levers::Error for a recipe whose loop levers does
// not own or that names no micro-batch parameter.
MemoryPlan plan_memory(const Recipe& recipe, const Config& cfg, const PlanTarget& target, bool only_configured = false);

struct LoopSpec;
// The same for the loop of the recipe called `name`.
MemoryPlan plan_memory(const std::string& name, const LoopSpec& loop, const Config& cfg, const PlanTarget& target,
                       bool only_configured = false);

// What a rank that ran out of memory says: the plan's figures, and the
// settings that fit (micro-batch, checkpointing, ZeRO).
std::string out_of_memory_advice(const MemoryPlan& plan);

// The plan as `recipe plan` prints it.
std::string plan_text(const MemoryPlan& plan);

// "80GB", "80 GiB", "512MB", "1.5TB" in bytes (powers of 1024); throws levers::Error naming the text.
std::size_t parse_memory_size(const std::string& text);
std::string memory_text(double bytes);  // "1.2 GiB", "350.0 MiB"

}  // namespace levers

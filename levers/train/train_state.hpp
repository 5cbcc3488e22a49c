// The checkpoint of a training run: everything `--resume` needs to continue it
// exactly, in levers' checkpoint file (levers/core/checkpoint.hpp).
//
//   metadata  {"kind": "levers-train-state", "recipe", "config", "world_size", "grad_accum",
//              "loop": LoopState, "adamw_steps", "data": [each rank's data state], ...}
//   tensors   "param/<name>" for every trained parameter, "adamw/m", "adamw/v"
//
// Under ZeRO with every rank on one node, AdamW's state is written sharded:
// each rank writes its own shard beside the file (`<file>.shard-<r>-of-<W>`:
// its moments, compactly, and the ranges they belong to), then rank 0 the
// file itself, which says so ("adamw_shards": W, no moment tensors). Where
// the run kept the f32 master values sharded too (ZeRO with a bf16 compute
// copy), each shard holds its master values ("master") and the file none
// ("param_shards": true, "params": the entries' names and shapes). The file
// comes last, so a checkpoint is whole when it exists. Reading puts the shards
// together, so it loads on any number of ranks, sharded or not.
#pragma once

#include "levers/core/checkpoint.hpp"
#include "levers/train/loop.hpp"

#include <filesystem>
#include <vector>

namespace levers::train {

struct TrainState {
    Checkpoint file;
    LoopState loop;
    long adamw_steps = 0;
    int world_size = 1;
    long grad_accum = 0;  // micro-batches per step of the run that wrote it (0: not recorded)
    std::vector<nlohmann::json> data;  // one per rank of the run that wrote it (null: no state)
    Tensor masters;  // the flat master values put together from the shards, where they hold them
};

// The micro-batches per step on `world` ranks that keep the global batch of
// the run that wrote `state` (its world_size x grad_accum micro-batches of
// one rank's size): the data each step sees stays the same on another GPU
// count. 0 if the checkpoint does not record it. Throws levers::Error naming
// the rank counts that would fit when `world` does not divide it.
long grad_accum_on(const TrainState& state, int world, const std::filesystem::path& path);

// AdamW's moments over the whole flat buffer (undefined when each rank
// wrote its shard: `shards` of them), and its step count. Where the set
// keeps its master values sharded (ZeRO with a compute copy), they are
// optimizer state too: whole in `masters`, or in the shard files.
struct OptimizerState {
    Tensor m, v;
    long steps = 0;
    int shards = 0;
    Tensor masters;
};
// Collective when the optimizer holds a shard (ZeRO): every rank's moments
// (and master values, where `params` keeps a shard of them) put together, on
// every rank (for ranks on several nodes, whose shard files would not meet
// in one directory).
OptimizerState whole_state(const AdamW& optimizer, const ParamSet& params);

// The shard file of `rank` of `world` beside checkpoint `file`.
std::filesystem::path shard_path(const std::filesystem::path& file, int rank, int world);
// Writes this rank's shard of AdamW's state beside `file`, atomically, with
// the master values of the shard where `params` keeps only those.
void save_optimizer_shard(const std::filesystem::path& file, const AdamW& optimizer, const ParamSet& params, int rank,
                          int world);

// Writes atomically (a crash leaves the previous file); `metadata` holds the
// recipe's name and config and is completed here.
void save_train_state(const std::filesystem::path& path, nlohmann::json metadata, const ParamSet& params,
                      const OptimizerState& optimizer, const LoopState& loop, const std::vector<nlohmann::json>& data);

// Reads and checks a train-state file; refuses, naming the file, anything else.
TrainState read_train_state(const std::filesystem::path& path);

// Copies the saved parameters into `params`; refuses, naming the file and the
// first difference, a checkpoint of another model.
void load_parameters(const TrainState& state, ParamSet& params, const std::filesystem::path& path);

}  // namespace levers::train

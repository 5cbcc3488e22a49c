// The checkpoint of a training run: everything `--resume` needs to continue it
// exactly, in levers' checkpoint file (framework/core/checkpoint.hpp).
//
//   metadata  {"kind": "levers-train-state", "recipe", "config", "world_size",
//              "loop": LoopState, "adamw_steps", "data": [each rank's data state], ...}
//   tensors   "param/<name>" for every trained parameter, "adamw/m", "adamw/v"
#pragma once

#include "framework/core/checkpoint.hpp"
#include "framework/train/loop.hpp"

#include <filesystem>
#include <vector>

namespace levers::train {

struct TrainState {
    Checkpoint file;
    LoopState loop;
    long adamw_steps = 0;
    int world_size = 1;
    std::vector<nlohmann::json> data;  // one per rank of the run that wrote it (null: no state)
};

// Writes atomically (a crash leaves the previous file); `metadata` holds the
// recipe's name and config and is completed here.
void save_train_state(const std::filesystem::path& path, nlohmann::json metadata, const ParamSet& params,
                      const AdamW& optimizer, const LoopState& loop, const std::vector<nlohmann::json>& data);

// Reads and checks a train-state file; refuses, naming the file, anything else.
TrainState read_train_state(const std::filesystem::path& path);

// Copies the saved parameters into `params`; refuses, naming the file and the
// first difference, a checkpoint of another model.
void load_parameters(const TrainState& state, ParamSet& params, const std::filesystem::path& path);

}  // namespace levers::train

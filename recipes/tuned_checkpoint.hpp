// A fine_tune or sft checkpoint of a Hugging Face model (a run's
// checkpoints/step-N.ckpt or best.ckpt) made a model again, so a run can be
// exported at any step: the base directory the run read, the adapters
// attached as the run attached them, the trained values loaded, LoRA merged.
#pragma once

#include "levers/models/peft_adapter.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace levers::recipes {

struct TunedCheckpoint {
    std::filesystem::path file;
    std::string recipe;           // fine_tune or sft
    std::filesystem::path base;   // the Hugging Face directory the run read (its --set model=)
    long step = 0;
    models::LoraSettings lora;    // rank 0: every weight was trained
    std::uint64_t seed = 0;
};

// From the checkpoint's header alone (a check step's look). `base` replaces
// the directory the run recorded (empty: that one). Refuses, naming the file,
// a checkpoint of another recipe or of a GPT, and a base that is not there.
TunedCheckpoint read_tuned_checkpoint(const std::filesystem::path& file, const std::filesystem::path& base = {});

// Rebuilds the model on the CPU in f32, loads the checkpoint's values, merges
// LoRA and writes a Hugging Face directory at `dir` with the base's tokenizer.
void save_tuned_checkpoint(const TunedCheckpoint& ck, const std::filesystem::path& dir);

}  // namespace levers::recipes

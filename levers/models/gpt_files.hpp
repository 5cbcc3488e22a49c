// Opening a GPT from any file levers reads, with the tokenizer that goes with it.
#pragma once

#include "levers/models/gpt.hpp"
#include "levers/models/language_model.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace levers::models {

enum class WeightsFormat { levers_checkpoint, safetensors };

// What a weights file is, by its first bytes (a levers checkpoint starts
// with LEVERSCK; safetensors with its header's length, then '{'). Throws
// levers::Error naming the file (after `what`, the flag that gave it:
// "--set weights=") and both accepted formats when it is neither, or missing.
WeightsFormat weights_format(const std::filesystem::path& path, const std::string& what = "");

// A levers checkpoint (model.ckpt, from pretrain or fine_tune) or GPT-2 weights
// in safetensors (n_head as load_gpt2_safetensors takes it), told apart by content.
std::unique_ptr<Gpt> load_any_gpt(const std::filesystem::path& path, int n_head = 0);

// Text to tokens and back for a model: bytes for a vocabulary of 256, else
// GPT-2's BPE, from the vocab.json and merges.txt beside the weights if they
// are there, else the GPT-2 files the set-up installs. Throws levers::Error if
// the vocabulary sizes differ.
TextCodec codec_for(Gpt& model, const std::filesystem::path& weights);
// The same for a vocabulary size (fine_tune tokenizes its corpus before the model is built).
TextCodec codec_for_vocab(int vocab, const std::filesystem::path& weights);

// Writes `model` by the extension of `path`: .safetensors (Hugging Face's
// GPT-2 layout) or a levers checkpoint.
void save_any_gpt(const std::filesystem::path& path, Gpt& model);

}  // namespace levers::models

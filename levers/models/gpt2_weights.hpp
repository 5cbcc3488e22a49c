// GPT-2 weights in Hugging Face's safetensors layout, so a GPT trained here
// loads in transformers and GPT-2 checkpoints people already have load here:
//
//   transformer.wte.weight [vocab, C]        transformer.wpe.weight [block, C]
//   transformer.h.N.ln_1.weight / .bias      transformer.h.N.attn.c_attn.weight [C, 3C]  ...
//
// The four Conv1D weights per block (attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj) are stored [in, out]; levers keeps nn.Linear's [out, in], so
// they are transposed both ways. Names without the "transformer." prefix (a
// GPT2Model's) load too; lm_head.weight (tied to wte) and the attention-mask
// buffers are skipped.
#pragma once

#include "levers/models/gpt.hpp"

#include <filesystem>
#include <memory>

namespace levers::models {

// The head count is not in the weights: `n_head` if > 0, else the file's
// metadata (levers writes it), else config.json beside the file (Hugging
// Face's). Throws levers::Error naming the file and the tensor at fault.
std::unique_ptr<Gpt> load_gpt2_safetensors(const std::filesystem::path& path, int n_head = 0);

void save_gpt2_safetensors(const std::filesystem::path& path, Gpt& model);

}  // namespace levers::models

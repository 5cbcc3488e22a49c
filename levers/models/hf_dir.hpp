// Hugging Face model directories in and out: config.json beside
// model.safetensors, or beside model.safetensors.index.json and the shards it
// names (F32, BF16 or F16, or bitsandbytes' 4-bit weights: bnb_4bit.hpp).
// Reading maps the files and puts each tensor straight into its parameter on
// the model's device; nothing of the whole model is staged on the host. Writing makes the same layout, so the
// directory loads in transformers' from_pretrained unchanged.
#pragma once

#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/safetensors.hpp"
#include "levers/kernels/quant4.hpp"
#include "levers/models/llama.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace levers::models {

// The weights of a directory, opened (mapped, headers checked), by name.
struct HfWeights {
    std::vector<data::SafeTensorsFile> files;
    std::map<std::string, const data::StoredTensor*> tensors;
    std::map<std::string, std::string> file_of;  // tensor name -> its file's name, for messages
};

// Whether `path` is a directory with a config.json (what `--set model=` takes).
bool is_hf_dir(const std::filesystem::path& path);
// Throws levers::Error naming the directory, the file or the tensor at fault:
// no config.json, no weights, an index naming a missing shard, a truncated file.
HfWeights open_hf_weights(const std::filesystem::path& dir);

// The directory's model on `device`, computing in `compute` (f32; bf16 on a
// GPU). Every tensor is checked against the configuration before any is
// read: one missing, unexpected, of the wrong shape or dtype is an error
// naming the tensor, its file and what the configuration makes of it.
// Inside a shape trace (`recipe plan`) a directory may hold config.json
// alone: the model is laid out from it, its weights never read. `prepare`,
// where given, runs on the model as declared, before it goes to the device
// and its weights are read: LoRA adapters attached there leave a frozen base
// that goes to a GPU as it trains (bf16 alone in a bf16 run), never whole in
// f32 there first.
std::unique_ptr<Llama> load_hf_model(const std::filesystem::path& dir, Device device = Device::cpu(),
                                     DType compute = DType::f32,
                                     const std::function<void(Llama&)>& prepare = {});
// Only the checks load_hf_model makes before it reads (for a recipe's check step).
LlamaConfig check_hf_dir(const std::filesystem::path& dir);

struct HfSaveOptions {
    std::string dtype;                         // "float32", "bfloat16" or "float16"; empty: the config's torch_dtype
    std::size_t max_shard_bytes = 5'000'000'000;  // transformers' default "5GB"
    std::filesystem::path tokenizer_from;      // a directory whose tokenizer files are copied beside the weights
    // Every Linear weight but lm_head written in 4 bits as bitsandbytes saves them (levers/models/bnb_4bit.hpp),
    // with config.json's quantization_config; without it every weight is written in full precision (4-bit
    // ones dequantized) and quantization_config left out.
    std::optional<ops::Quant4Spec> quantize;
};
// Writes `model` as a Hugging Face directory at `dir` (made; one levers or
// transformers wrote before is replaced; any other non-empty directory is
// refused). Everything is written beside it first and renamed into place,
// so a failure leaves nothing half-written.
void save_hf_model(const std::filesystem::path& dir, Llama& model, const HfSaveOptions& options = {});

// The directory's own tokenizer (tokenizer.json) for a model of `vocab` tokens: text encoded
// with the tokens its template adds (BOS), decoded with special tokens
// written out. Throws levers::Error naming the directory if it has no
// tokenizer.json or one with more tokens than the model's vocabulary.
TextCodec hf_codec(const std::filesystem::path& dir, std::int64_t vocab);
// The tokenizer itself, under the same checks.
std::shared_ptr<data::BpeTokenizer> hf_tokenizer(const std::filesystem::path& dir, std::int64_t vocab);
// Its tables alone, under the same checks but for matching the merges to the
// vocabulary (what building the tokenizer does): for GGUF export, which
// writes the tables and encodes nothing.
data::BpeTokenizer::Spec hf_tokenizer_tables(const std::filesystem::path& dir, std::int64_t vocab);
// The same checks for a recipe's check step (the tokenizer is read, the model is not).
void check_hf_tokenizer(const LlamaConfig& config, const std::filesystem::path& dir);

// The files copied with a model: tokenizer.json, tokenizer_config.json, ...
const std::vector<std::string>& tokenizer_files();

}  // namespace levers::models

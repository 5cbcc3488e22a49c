// A Hugging Face directory of the Llama family (Gemma 2 and 3 and Phi-3
// included) to one GGUF file, as
// llama.cpp's own converter and quantizer would write it: the architecture's
// metadata keys, llama.cpp's tensor names (q and k rows reordered for the
// llama architecture's interleaved rotation), the tokenizer
// (models/gguf_vocab.hpp), and the weights in the file type asked for, with
// llama.cpp's mixes: q4_k_m and q5_k_m keep attn_v and ffn_down in q6_K on
// the layers its rule picks, the output (or tied embeddings) in q6_K; norms
// and biases stay f32. A tensor whose rows a block cannot divide falls back
// as llama.cpp's does (q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0, then f16).
//
// Tensors stream: each is read from the mapped safetensors a slice of rows
// at a time, quantized on every thread and written, so memory holds one
// slice, never the model. The file is written under a temporary name and
// renamed when complete; an Ollama Modelfile goes beside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace levers::models {

struct GgufExportOptions {
    std::string type = "f16";  // one of gguf_file_types()
    bool overwrite = false;     // replace an existing file (and Modelfile)
    bool modelfile = true;      // write an Ollama Modelfile beside the file
    std::string name;           // general.name (empty: the model directory's name)
    // Called after each tensor is written: tensors done, of how many, its name and type.
    std::function<void(std::size_t, std::size_t, const std::string&, const std::string&)> progress;
};

struct GgufExportReport {
    std::filesystem::path file, modelfile;
    std::string architecture;
    std::uint64_t bytes = 0;
    std::map<std::string, int> tensors_by_type;  // ggml type name -> how many tensors
    std::vector<std::string> notes;              // fallbacks and what the format leaves out, one line each
};

// "f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k", for messages.
const char* gguf_file_types();
// Throws levers::Error naming `type` and the valid ones unless it is one of them.
void check_gguf_file_type(const std::string& type);
// The HF model types export writes, for messages.
const char* gguf_model_types();

// That the directory's model can go to GGUF: its configuration, architecture
// and tokenizer (for a training's check step, before it trains).
void check_gguf_source(const std::filesystem::path& model_dir);
// What export checks before it writes anything (a recipe's check step): the
// type, the configuration and its architecture, the tokenizer, and that the
// output (and Modelfile) is not there unless overwrite. Throws levers::Error naming the fault.
void check_gguf_export(const std::filesystem::path& model_dir, const std::filesystem::path& out,
                       const GgufExportOptions& options);

GgufExportReport export_gguf(const std::filesystem::path& model_dir, const std::filesystem::path& out,
                             const GgufExportOptions& options);

}  // namespace levers::models

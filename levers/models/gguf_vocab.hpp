// A model directory's tokenizer as GGUF metadata, the way llama.cpp reads
// it: tokenizer.ggml.model "gpt2" (byte-level BPE: tokens as the vocabulary
// spells them, merges, and the pre-tokenizer's name, known by its regex) or
// "llama" (SentencePiece-style BPE: tokens with scores that replay the merge
// order, byte tokens), token types, BOS/EOS/padding ids, whether BOS is
// added, and the chat template. Also the stop strings an Ollama Modelfile
// lists: the template's special markers and the EOS token.
#pragma once

#include "levers/data/gguf.hpp"
#include "levers/models/llama_config.hpp"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace levers::models {

struct GgufVocab {
    std::vector<std::pair<std::string, data::GgufValue>> metadata;
    std::vector<std::string> stop;  // for the Modelfile's PARAMETER stop lines
};

// Throws levers::Error naming the directory: no tokenizer.json, a tokenizer
// levers cannot read, or a pre-tokenizer llama.cpp has no name for.
GgufVocab gguf_vocab(const std::filesystem::path& dir, const LlamaConfig& config);

}  // namespace levers::models

// What the language-model recipes (eval_lm, sample, fine_tune) ask of a
// model, whichever it is: GPT-2 (gpt.hpp) or a Llama-family decoder
// (llama.hpp). Scoring takes a batch of token windows; generation goes
// through a Decoder, which feeds the model only what it has not seen (a KV
// cache where the model has one).
#pragma once

#include "levers/nn/module.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace levers::models {

class LanguageModel : public nn::Module {
public:
    // tokens [B, T] (i32, usually on the host): the mean next-token loss
    // against targets [B, T] (ignoring -100), one element, differentiable;
    // the logits [B, T, vocab].
    virtual Tensor loss(const Tensor& tokens, const Tensor& targets) = 0;
    virtual Tensor logits(const Tensor& tokens) = 0;
    virtual std::int64_t vocab_size() const = 0;
    // The longest sequence one forward takes.
    virtual std::int64_t context_length() const = 0;
    // One line for logs: "GPT, 4 layers x 128" or "llama, 16 layers x 2048, 32 heads (8 key-value)".
    virtual std::string summary() const = 0;

    // Generation state: next() takes the tokens that follow those given so
    // far and returns the logits [vocab] (f32, host) of the position after them.
    class Decoder {
    public:
        virtual ~Decoder() = default;
        virtual Tensor next(const std::vector<std::int32_t>& tokens) = 0;
    };
    // A decoder for sequences of up to `length` tokens (prompt included).
    virtual std::unique_ptr<Decoder> decoder(std::int64_t length) = 0;

    // Activation checkpointing of every block in training (levers/nn/checkpoint.hpp):
    // one block's activations live at a time, for one more forward per block.
    void checkpoint_blocks(bool on = true) { checkpoint_blocks_ = on; }
    bool checkpoints_blocks() const { return checkpoint_blocks_; }

protected:
    bool checkpoint_blocks_ = false;
};

// Text to tokens and back for a model.
struct TextCodec {
    std::function<std::vector<std::int32_t>(const std::string&)> encode;
    std::function<std::string(const std::vector<std::int32_t>&)> decode;
    std::string name;  // "bytes", "GPT-2 BPE (<files>)", "tokenizer.json (byte-level BPE, 128256 tokens)"
};

}  // namespace levers::models

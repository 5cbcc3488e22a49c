// QLoRA's base: a model's Linear layers holding their weights in 4 bits
// (levers/kernels/quant4.hpp), frozen, LoRA's adapters trained on top.
#pragma once

#include "levers/nn/module.hpp"

#include <cstdint>

namespace levers::nn {

// Every Linear of `model` but the output layer (lm_head, which bitsandbytes
// leaves in full precision, as it does embeddings and norms) holds its
// weight in 4 bits from now on; values it has are quantized now, the others
// as they are given (Parameter::set_quantized). Returns how many.
int hold_linears_in_4bit(Module& model, const ops::Quant4Spec& spec);
// Whether any weight of `model` is held in 4 bits.
bool has_4bit_weights(Module& model);
// The bytes its 4-bit weights hold (codes and scales), and the values they stand for.
struct Held4Bit {
    std::int64_t bytes = 0, values = 0;
};
Held4Bit held_in_4bit(Module& model);

}  // namespace levers::nn

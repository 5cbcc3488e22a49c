// LoRA fine-tuning of any model: adapters on the Linear layers you name, the
// rest frozen (levers/kernels/lora.hpp has the maths).
#pragma once

#include "levers/nn/layers.hpp"

#include <string>
#include <vector>

namespace levers::nn {

// Attaches a rank-`rank` adapter (scale alpha / rank) to every Linear of
// `model` whose full name ends with one of `targets` ("attn.c_attn"; "all-linear",
// as PEFT has it, every Linear but the output layer lm_head, and here but a
// mixture's routers, which train whole or stay frozen), freezes
// every other parameter and lays the model out again, the adapters' A drawn
// from `seed`. Returns how many layers got one; a target naming no layer is
// an error naming the model's layers. Call after loading weights, before training.
int attach_lora(Module& model, int rank, double alpha, std::uint64_t seed, const std::vector<std::string>& targets);
// The layers `targets` choose, as attach_lora chooses them (a target naming no layer is the same error), with
// nothing attached: a recipe's check step asks it of a model declared without weights.
std::vector<Linear*> lora_layers(Module& model, const std::vector<std::string>& targets);
// The targets as PEFT's adapter_config.json lists them: "all-linear" as the
// last parts of the names of the layers it chose in `model`.
std::vector<std::string> resolved_targets(Module& model, const std::vector<std::string>& targets);
// Whether any layer of `model` has an adapter.
bool has_lora(Module& model);
// Folds every adapter into its frozen weight (the model then computes the
// same function without them) and zeroes them.
void merge_lora(Module& model);
// While one lives, every adapter of `model` is switched off: the model
// computes its frozen base (a LoRA run's reference model, with no second
// copy of the weights). Adapters switched off already stay so after.
class AdaptersOff {
public:
    explicit AdaptersOff(Module& model);
    ~AdaptersOff();
    AdaptersOff(const AdaptersOff&) = delete;
    AdaptersOff& operator=(const AdaptersOff&) = delete;

private:
    std::vector<Linear*> switched_;
};
// Every Linear of `model` (depth first), for code that walks the layers.
std::vector<Linear*> linear_layers(Module& model);

}  // namespace levers::nn

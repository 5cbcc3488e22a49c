#include "levers/nn/quantize.hpp"

#include "levers/nn/sparse_moe.hpp"

#include "levers/nn/lora.hpp"

#include <optional>
#include <vector>

namespace levers::nn {

int hold_linears_in_4bit(Module& model, const ops::Quant4Spec& spec) {
    std::vector<Parameter*> chosen;
    for (Linear* l : linear_layers(model.root()))
        if (l->name() != "lm_head" && !is_router(*l) && !l->weight.held_in_4bit()) chosen.push_back(&l->weight);
    // Values a laid-out model has are quantized first, all from one layout (each weight held in 4 bits lays the
    // model out again); a model not laid out yet is quantized as its weights are given.
    std::vector<std::optional<ops::Quantized4>> values(chosen.size());
    for (std::size_t i = 0; i < chosen.size(); ++i)
        if (chosen[i]->has_values()) values[i] = ops::quantize_4bit(chosen[i]->value(), spec);
    for (std::size_t i = 0; i < chosen.size(); ++i) chosen[i]->hold_in_4bit(spec, std::move(values[i]));
    return static_cast<int>(chosen.size());
}

bool has_4bit_weights(Module& model) {
    for (const auto& [name, p] : model.root().named_parameters())
        if (p->held_in_4bit()) return true;
    return false;
}

Held4Bit held_in_4bit(Module& model) {
    Held4Bit out;
    for (const auto& [name, p] : model.root().named_parameters())
        if (p->held_in_4bit()) {
            out.values += p->shape().numel();
            if (p->quantized()) out.bytes += p->quantized()->bytes();
        }
    return out;
}

}  // namespace levers::nn

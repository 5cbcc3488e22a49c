#include "levers/nn/quantize.hpp"

#include "levers/nn/lora.hpp"

namespace levers::nn {

int hold_linears_in_4bit(Module& model, const ops::Quant4Spec& spec) {
    int n = 0;
    for (Linear* l : linear_layers(model.root()))
        if (l->name() != "lm_head" && !l->weight.held_in_4bit()) {
            l->weight.hold_in_4bit(spec);
            ++n;
        }
    return n;
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

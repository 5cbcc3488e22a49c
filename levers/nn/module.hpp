// Modules: models as compositions of layers that own named parameters (as
// PyTorch's nn.Module and its C++ frontend). A module declares its
// parameters and registers its children; the root module (the model) lays
// every parameter out in two flat buffers, the trainable ones and the frozen
// ones, in the order named_parameters() gives (own parameters first, then
// each child's, depth first: a model declared in forward order is laid out
// in forward order, which data parallelism needs). Parameters are views into
// those buffers; the optimizer and DDP see the trainable buffer as one
// ParamSet (parameters()).
//
//   struct Block : nn::Layer {
//       nn::LayerNorm norm{*this, "norm", 256};
//       nn::Linear fc{*this, "fc", 256, 256};
//       Tensor forward(const Tensor& x) override { return x + fc(ops::gelu(norm(x))); }
//   };
//
// Lifecycle: declare (constructors), initialize(seed) (layout + initialisers;
// done with seed 0 on first use otherwise), optionally freeze or attach LoRA
// adapters (the model is laid out again, values kept), to(device, dtype),
// then train. Laying out again after an optimizer was made from
// parameters() is refused by that optimizer at its next step.
//
// Modules are not copyable or movable (children refer to their parent);
// own them by value as members, or through containers (containers.hpp).
#pragma once

#include "levers/core/autograd.hpp"
#include "levers/core/params.hpp"
#include "levers/kernels/quant4.hpp"
#include "levers/nn/init.hpp"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace levers::nn {

class Module;
class Layout;

class Parameter {
public:
    // The tensor to compute with: on the model's device, in its compute
    // dtype (a bf16 copy of the f32 master values on a GPU computing in
    // bf16), recording gradients when the parameter is trainable.
    const Tensor& operator()() const;
    // The stored (master) values: f32, or f64 for a model in f64. A view:
    // writes reach the model (then Module::parameters_changed()). Fails
    // while a ZeRO training loop keeps them sharded over the ranks.
    Tensor value() const;
    const std::string& name() const { return name_; }  // within its module: "weight"
    std::string full_name() const;                     // within the model: "h.0.attn.c_attn.weight"
    const Shape& shape() const { return shape_; }
    const Init& init() const { return init_; }
    bool trainable() const { return trainable_; }
    bool decays() const { return decay_; }
    void set_decay(bool on);
    // Whether it learns (the model is laid out again on next use).
    void set_trainable(bool on);
    Module& owner() const { return *owner_; }

    // A frozen weight held in 4 bits (QLoRA's base, levers/kernels/quant4.hpp):
    // its codes and scales on the model's device, in place of a slot in the
    // flat buffers. value() and operator() refuse it; quantized() computes.
    bool held_in_4bit() const { return quant_.has_value(); }
    // Whether it has values (laid out, or given as 4-bit codes): false from declaration to the first layout.
    bool has_values() const { return laid_out_ || quantized_ != nullptr; }
    const std::optional<ops::Quant4Spec>& quant_spec() const { return quant_; }
    // Its codes and scales (null until it has values).
    const std::shared_ptr<const ops::Quantized4>& quantized() const { return quantized_; }
    // Holds it in 4 bits from now on, frozen: `values` where given, else
    // values it has quantized now; one without values gets them from
    // set_quantized (a model as it loads).
    void hold_in_4bit(const ops::Quant4Spec& spec, std::optional<ops::Quantized4> values = std::nullopt);
    // Its values, quantized as `spec` says, on the model's device.
    void set_quantized(ops::Quantized4 q);
    // Full precision again: the dequantized values (a merged model's weight).
    void dequantize();

private:
    friend class Module;
    friend class Layout;
    Parameter(Module& owner, std::string name, Shape shape, Init init, bool decay);
    Module* owner_;
    std::string name_;
    Shape shape_;
    Init init_;
    bool decay_;
    bool trainable_ = true;
    bool laid_out_ = false;  // has values (kept when the model is laid out again)
    std::shared_ptr<autograd::Leaf> leaf_ = std::make_shared<autograd::Leaf>();
    const ParamSet* set_ = nullptr;  // where it was laid out, and its id there
    int id_ = -1;
    Tensor compute_;
    std::optional<ops::Quant4Spec> quant_;         // held in 4 bits
    std::shared_ptr<const ops::Quantized4> quantized_;
    Tensor pending_;  // values the next layout takes (a 4-bit weight dequantized), on the host
    void check_not_4bit(const char* what) const;
};

class Module {
public:
    Module();
    virtual ~Module();
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    // --- the whole model (any module answers for its root) ------------------
    // Every parameter with its dotted name, depth first.
    std::vector<std::pair<std::string, Parameter*>> named_parameters();
    // The trainable parameters' flat buffer (laid out on first use).
    ParamSet& parameters();
    ParamSet& params() { return parameters(); }  // the name levers' recipes use
    // The frozen ones (no gradients).
    ParamSet& frozen_parameters();
    // Lays out the model and runs every initialiser from `seed`; values set
    // before (a checkpoint loaded, LoRA merged) are replaced. Root only.
    void initialize(std::uint64_t seed);
    // Lays the model out now, keeping the values parameters have; those
    // without (just added: adapters) are initialised in order from `seed`.
    void lay_out(std::uint64_t seed);
    // Moves the model to `device`, computing in `compute`: f32 or f64 on the
    // CPU (parameters converted); f32 or bf16 on a GPU (f32 master weights,
    // gradients and activations in `compute`). Back to the CPU works too.
    void to(Device device, DType compute = DType::f32);
    Device device();
    DType compute_dtype();
    // `x` where the model computes: on its device, floats in its compute
    // dtype (integer tensors, token ids, and masks keep theirs). A model's forward
    // starts with it, so callers pass host tensors.
    Tensor on_device(const Tensor& x);
    // Training mode (dropout on) or evaluation mode, for the whole model.
    void train(bool on = true);
    void eval() { train(false); }
    bool training();
    // Every parameter of this module and its children stops learning (or
    // starts again); the model is laid out again on next use.
    void freeze(bool frozen = true);
    // After writing parameter values directly (value().copy_from(...)): the
    // compute copies of a bf16 model catch up before the next forward.
    void parameters_changed();
    // Which random stream dropout draws from (the framework sets each rank's).
    void set_stream(std::uint64_t stream);
    std::uint64_t stream();
    std::uint64_t seed();
    // State beyond parameters (dropout's counters), for exact resumes.
    nlohmann::json save_state();
    void load_state(const nlohmann::json& state);

    // --- this module ----------------------------------------------------------
    const std::string& name() const { return name_; }  // under its parent
    std::string full_name() const;                     // under the root ("" for the root)
    Module* parent() const { return parent_; }
    Module& root();
    const std::vector<std::pair<std::string, Module*>>& children() const { return children_; }
    const std::vector<std::unique_ptr<Parameter>>& own_parameters() const { return params_; }

    // Registers `child` under `name` (a member, or one a container owns).
    void register_module(std::string name, Module& child);

protected:
    // Declares a parameter: `decay` defaults to weight decay for matrices and
    // embeddings (two or more dimensions), none for biases and gains.
    Parameter& param(std::string name, Shape shape, Init init);
    Parameter& param(std::string name, Shape shape, Init init, bool decay);
    // Module-specific state for save_state (dropout's counter).
    virtual nlohmann::json state() const;  // null: none
    virtual void set_state(const nlohmann::json&) {}

private:
    friend class Parameter;
    friend class Layout;
    Layout& layout();  // the root's, laid out
    void invalidate();  // the root lays out again on next use
    void walk(const std::string& prefix, std::vector<std::pair<std::string, Parameter*>>& out);

    std::string name_;
    Module* parent_ = nullptr;
    std::vector<std::unique_ptr<Parameter>> params_;
    std::vector<std::pair<std::string, Module*>> children_;
    std::unique_ptr<Layout> layout_;  // the root's
};

// A module with one tensor in and one out: what containers compose.
class Layer : public Module {
public:
    virtual Tensor forward(const Tensor& x) = 0;
    Tensor operator()(const Tensor& x) { return forward(x); }
};

}  // namespace levers::nn

// Parameter's members (declared in module.hpp beside Module, which owns them).
#include "levers/nn/module.hpp"

#include "levers/nn/layout.hpp"

namespace levers::nn {

Parameter::Parameter(Module& owner, std::string name, Shape shape, Init init, bool decay)
    : owner_(&owner), name_(std::move(name)), shape_(shape), init_(init), decay_(decay) {}

void Parameter::check_not_4bit(const char* what) const {
    LEVERS_CHECK(!quant_, "'{}' is held in 4 bits ({}): it has no {}; its layer computes with quantized(), and "
                 "dequantize() makes it full precision again", full_name(), ops::name_of(quant_->type), what);
}

const Tensor& Parameter::operator()() const {
    check_not_4bit("compute tensor");
    (void)owner_->layout();
    set_->ready(id_);  // arrived (ZeRO gathers while forward starts), and the compute copy caught up
    return compute_;
}

Tensor Parameter::value() const {
    check_not_4bit("full-precision values");
    (void)owner_->layout();
    return set_->param_tensor(id_);
}

void Parameter::set_decay(bool on) {
    decay_ = on;
    owner_->invalidate();
}

void Parameter::set_trainable(bool on) {
    LEVERS_CHECK(!on || !quant_, "'{}' is held in 4 bits: frozen weights in 4 bits do not train (train LoRA adapters "
                 "on it: --set lora_r=16; or load it without quantize=)", full_name());
    trainable_ = on;
    owner_->invalidate();
}

void Parameter::hold_in_4bit(const ops::Quant4Spec& spec, std::optional<ops::Quantized4> values) {
    LEVERS_CHECK(!quant_, "'{}' is held in 4 bits already", full_name());
    LEVERS_CHECK(shape_.ndim() == 2, "'{}' {}: only matrices (a Linear's weight) are held in 4 bits", full_name(),
                 shape_.str());
    if (!values && laid_out_) values = ops::quantize_4bit(value(), spec);
    if (values) quantized_ = std::make_shared<const ops::Quantized4>(std::move(*values));
    quant_ = spec;
    trainable_ = false;
    owner_->invalidate();
}

void Parameter::set_quantized(ops::Quantized4 q) {
    LEVERS_CHECK(quant_, "'{}' is not held in 4 bits", full_name());
    LEVERS_CHECK(q.shape == shape_, "'{}' is {}; 4-bit values of {} do not fit", full_name(), shape_.str(),
                 q.shape.str());
    const Device device = owner_->root().device();
    quantized_ = std::make_shared<const ops::Quantized4>(q.device() == device ? std::move(q) : q.to(device));
}

void Parameter::dequantize() {
    LEVERS_CHECK(quant_, "'{}' is not held in 4 bits", full_name());
    if (quantized_) pending_ = ops::dequantize_4bit(*quantized_, DType::f32).to(Device::cpu());
    quant_.reset();
    quantized_.reset();
    owner_->invalidate();
}

std::string Parameter::full_name() const {
    const std::string owner = owner_->full_name();
    return owner.empty() ? name_ : owner + "." + name_;
}

}  // namespace levers::nn

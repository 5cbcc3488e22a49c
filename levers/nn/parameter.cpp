// Parameter's members (declared in module.hpp beside Module, which owns them).
#include "levers/nn/module.hpp"

#include "levers/nn/layout.hpp"

namespace levers::nn {

Parameter::Parameter(Module& owner, std::string name, Shape shape, Init init, bool decay)
    : owner_(&owner), name_(std::move(name)), shape_(shape), init_(init), decay_(decay) {}

const Tensor& Parameter::operator()() const {
    (void)owner_->layout();
    set_->ready(id_);  // arrived (ZeRO gathers while forward starts), and the compute copy caught up
    return compute_;
}

Tensor Parameter::value() const {
    (void)owner_->layout();
    return set_->param_tensor(id_);
}

void Parameter::set_decay(bool on) {
    decay_ = on;
    owner_->invalidate();
}

void Parameter::set_trainable(bool on) {
    trainable_ = on;
    owner_->invalidate();
}

std::string Parameter::full_name() const {
    const std::string owner = owner_->full_name();
    return owner.empty() ? name_ : owner + "." + name_;
}

}  // namespace levers::nn

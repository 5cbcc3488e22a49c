#include "levers/nn/module.hpp"

#include <nlohmann/json.hpp>

#include "levers/nn/layout.hpp"

#include <algorithm>

namespace levers::nn {

Module::Module() = default;

Module::~Module() {
    for (auto& p : params_) {  // a graph that outlives the model adds into nothing of it
        p->leaf_->set = nullptr;
        p->leaf_->requires_grad = false;
    }
}

Parameter& Module::param(std::string name, Shape shape, Init init) {
    const bool decay = shape.ndim() >= 2;
    return param(std::move(name), shape, init, decay);
}

Parameter& Module::param(std::string name, Shape shape, Init init, bool decay) {
    LEVERS_CHECK(!name.empty() && name.find('.') == std::string::npos, "parameter name '{}' must be non-empty and "
                 "without dots (dots join module names)", name);
    for (const auto& p : params_)
        LEVERS_CHECK(p->name() != name, "module '{}' declares parameter '{}' twice", full_name(), name);
    params_.push_back(std::unique_ptr<Parameter>(new Parameter(*this, std::move(name), shape, init, decay)));
    invalidate();
    return *params_.back();
}

void Module::register_module(std::string name, Module& child) {
    LEVERS_CHECK(!name.empty() && name.find('.') == std::string::npos,
                 "module name '{}' must be non-empty and without dots (dots join module names)", name);
    LEVERS_CHECK(child.parent_ == nullptr, "module '{}' is registered twice (as '{}' under '{}')", name,
                 child.full_name(), full_name());
    LEVERS_CHECK(!child.layout_, "module '{}' was laid out as a model of its own; register it before using it", name);
    for (const auto& [other, m] : children_)
        LEVERS_CHECK(other != name, "module '{}' has two children named '{}'", full_name(), name);
    child.parent_ = this;
    child.name_ = std::move(name);
    children_.emplace_back(child.name_, &child);
    invalidate();
}

Module& Module::root() {
    Module* m = this;
    while (m->parent_) m = m->parent_;
    return *m;
}

std::string Module::full_name() const {
    if (!parent_) return "";
    const std::string above = parent_->full_name();
    return above.empty() ? name_ : above + "." + name_;
}

void Module::walk(const std::string& prefix, std::vector<std::pair<std::string, Parameter*>>& out) {
    for (const auto& p : params_) out.emplace_back(prefix + p->name(), p.get());
    for (const auto& [name, child] : children_) child->walk(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Parameter*>> Module::named_parameters() {
    std::vector<std::pair<std::string, Parameter*>> out;
    root().walk("", out);
    return out;
}

void Module::invalidate() {
    Module& r = root();
    if (r.layout_) r.layout_->valid = false;
}

Layout& Module::layout() {
    Module& r = root();
    if (!r.layout_) {
        r.layout_ = std::make_unique<Layout>(r);
        r.layout_->build(0, true);
    } else if (!r.layout_->valid) {
        r.layout_->build(r.layout_->seed, false);
    }
    return *r.layout_;
}

ParamSet& Module::parameters() { return layout().trainable; }
ParamSet& Module::frozen_parameters() { return layout().frozen; }

void Module::initialize(std::uint64_t seed) {
    LEVERS_CHECK(!parent_, "initialize() on '{}': only the model (the root module) is initialised", full_name());
    if (!layout_) layout_ = std::make_unique<Layout>(*this);
    layout_->build(seed, true);
}

void Module::lay_out(std::uint64_t seed) {
    Module& r = root();
    if (!r.layout_) r.layout_ = std::make_unique<Layout>(r);
    r.layout_->build(seed, false);
}

void Module::to(Device device, DType compute) { layout().place(device, compute); }
Device Module::device() { return layout().device; }

Tensor Module::on_device(const Tensor& x) {
    const Layout& l = layout();
    const bool floats = is_float(x.dtype());
    return floats ? x.to(l.device, l.compute) : x.to(l.device);
}
DType Module::compute_dtype() { return layout().compute; }

void Module::train(bool on) { layout().training = on; }
bool Module::training() { return layout().training; }

void Module::freeze(bool frozen) {
    std::vector<std::pair<std::string, Parameter*>> mine;
    walk("", mine);
    for (auto& [name, p] : mine) p->trainable_ = !frozen;
    invalidate();
}

void Module::parameters_changed() {
    Layout& l = layout();
    l.trainable.changed();
    l.frozen.changed();
}

void Module::set_stream(std::uint64_t stream) { layout().stream = stream; }
std::uint64_t Module::stream() { return layout().stream; }
std::uint64_t Module::seed() { return layout().seed; }

nlohmann::json Module::state() const { return nullptr; }

nlohmann::json Module::save_state() {
    nlohmann::json out = nlohmann::json::object();
    std::vector<Module*> todo{&root()};
    while (!todo.empty()) {
        Module* m = todo.back();
        todo.pop_back();
        if (nlohmann::json s = m->state(); !s.is_null()) out[m->full_name()] = s;
        for (const auto& [name, child] : m->children_) todo.push_back(child);
    }
    return out;
}

void Module::load_state(const nlohmann::json& state) {
    std::vector<Module*> todo{&root()};
    while (!todo.empty()) {
        Module* m = todo.back();
        todo.pop_back();
        if (auto it = state.find(m->full_name()); it != state.end()) m->set_state(*it);
        for (const auto& [name, child] : m->children_) todo.push_back(child);
    }
}

}  // namespace levers::nn

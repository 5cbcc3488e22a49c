#include "framework/nn/module.hpp"

#include "framework/core/gpu.hpp"
#include "framework/core/rng.hpp"
#include "framework/nn/layout.hpp"

#include <algorithm>

namespace levers::nn {

// --- initialisers ---------------------------------------------------------------

std::string Init::describe() const {
    switch (kind) {
        case Kind::zeros: return "zeros";
        case Kind::ones: return "ones";
        case Kind::normal: return fmt::format("normal(mean {}, std {})", a, b);
        case Kind::uniform: return fmt::format("uniform({}, {})", a, b);
        case Kind::fan_in_uniform: return "uniform(+-1/sqrt(fan_in))";
    }
    return "?";
}

namespace {
// Fills host values `t` (f32 or f64) as `init` says, drawing from `rng`.
void fill(const Tensor& t, const Init& init, Rng& rng) {
    const std::int64_t n = t.numel();
    // fan_in: the elements each output row reads (a Linear's in_features; a convolution's in · kh · kw).
    const std::int64_t fan_in = t.shape().ndim() >= 2 && t.shape()[0] > 0 ? n / t.shape()[0] : t.shape().last();
    const double bound = t.shape().ndim() > 0 && fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 1;
    auto value = [&]() -> double {
        switch (init.kind) {
            case Init::Kind::zeros: return 0;
            case Init::Kind::ones: return 1;
            case Init::Kind::normal: return init.a + rng.normal() * init.b;
            case Init::Kind::uniform: return init.a + (init.b - init.a) * rng.uniform();
            case Init::Kind::fan_in_uniform: return (2 * rng.uniform() - 1) * bound;
        }
        return 0;
    };
    for (std::int64_t i = 0; i < n; ++i) {
        const double x = value();
        if (t.dtype() == DType::f64)
            t.data<double>()[i] = x;
        else
            t.data<float>()[i] = static_cast<float>(x);
    }
}

DType master_dtype(DType compute) { return compute == DType::f64 ? DType::f64 : DType::f32; }
}  // namespace

// --- parameters -------------------------------------------------------------------

Parameter::Parameter(Module& owner, std::string name, Shape shape, Init init, bool decay)
    : owner_(&owner), name_(std::move(name)), shape_(shape), init_(init), decay_(decay) {}

const Tensor& Parameter::operator()() const {
    Layout& l = owner_->layout();
    l.refresh();
    return compute_;
}

const Tensor& Parameter::value() const {
    (void)owner_->layout();
    return master_;
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

// --- the layout -------------------------------------------------------------------

void Layout::build(std::uint64_t init_seed, bool reinitialize) {
    const auto named = root_.named_parameters();
    const DType dtype = master_dtype(device.is_cpu() ? compute : DType::f32);
    // Values to keep, on the host, before the buffers go.
    std::vector<Tensor> kept(named.size());
    for (std::size_t i = 0; i < named.size(); ++i)
        if (!reinitialize && named[i].second->laid_out_)
            kept[i] = named[i].second->master_.to(Device::cpu(), dtype);
    trainable = ParamSet();
    frozen = ParamSet();
    std::vector<int> ids(named.size());
    for (std::size_t i = 0; i < named.size(); ++i) {
        Parameter& p = *named[i].second;
        ids[i] = (p.trainable_ ? trainable : frozen).add(named[i].first, p.shape_, p.decay_);
    }
    trainable.allocate(dtype, true);
    frozen.allocate(dtype, false);
    Rng rng(init_seed);
    for (std::size_t i = 0; i < named.size(); ++i) {
        Parameter& p = *named[i].second;
        const Tensor dst = (p.trainable_ ? trainable : frozen).param_tensor(ids[i]);
        if (kept[i].defined())
            dst.copy_from(kept[i]);
        else
            fill(dst, p.init_, rng);
        p.laid_out_ = true;
    }
    seed = init_seed;
    valid = true;
    const Device where = device;
    device = Device::cpu();
    place(where, compute);
}

void Layout::place(Device to, DType dtype) {
    if (to.is_cpu()) {
        LEVERS_CHECK(dtype == DType::f32 || dtype == DType::f64,
                     "a model on the CPU computes in f32 or f64, not {} ({} needs a card)", name_of(dtype),
                     name_of(dtype));
    } else {
        LEVERS_CHECK(dtype == DType::f32 || dtype == DType::bf16,
                     "a model on {} computes in f32 or bf16 (from f32 master weights), not {}", to.str(),
                     name_of(dtype));
        LEVERS_CHECK(built_with_cuda(), "a model on {}: this build of levers has no CUDA backend (nvcc was not found "
                     "when it was configured)", to.str());
    }
    const DType master = master_dtype(to.is_cpu() ? dtype : DType::f32);
    for (ParamSet* set : {&trainable, &frozen}) {
        if (set->device() != Device::cpu() && set->device() != to) set->to_device(Device::cpu(), set->dtype());
        if (set->dtype() != master) {
            if (!set->device().is_cpu()) set->to_device(Device::cpu(), set->dtype());
            set->convert(master);
        }
    }
    trainable.to_device(to, dtype == DType::bf16 ? DType::bf16 : master);
    frozen.to_device(to, master);
    // A compute copy where the model computes in another dtype than it keeps.
    trainable_copy_ = frozen_copy_ = Tensor();
    if (dtype != master) {
        trainable_copy_ = Tensor::persistent({trainable.size()}, dtype, to);
        frozen_copy_ = Tensor::persistent({frozen.size()}, dtype, to);
        trainable_copied_ = trainable.version() - 1;  // refresh on first use
        frozen_copied_ = frozen.version() - 1;
    }
    device = to;
    compute = dtype;
    bind();
    refresh();
}

void Layout::bind() {
    const auto named = root_.named_parameters();
    int t = 0, f = 0;
    for (const auto& [name, p] : named) {
        ParamSet& set = p->trainable_ ? trainable : frozen;
        const int id = p->trainable_ ? t++ : f++;
        p->master_ = set.param_tensor(id);
        const Tensor& copy = p->trainable_ ? trainable_copy_ : frozen_copy_;
        if (copy.defined()) {
            const auto& e = set.entry(id);
            p->compute_ = copy.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
        } else {
            p->compute_ = p->master_.detach();
        }
        autograd::Leaf& leaf = *p->leaf_;
        leaf.requires_grad = p->trainable_;
        leaf.set = p->trainable_ ? &trainable : nullptr;
        leaf.entry = p->trainable_ ? id : -1;
        leaf.grad = p->trainable_ ? trainable.grad_tensor(id) : Tensor();
        if (p->trainable_) p->compute_.set_leaf(p->leaf_);
    }
}

void Layout::refresh() {
    if (trainable_copy_.defined() && trainable_copied_ != trainable.version()) {
        trainable_copy_.convert_from(trainable.params());
        trainable_copied_ = trainable.version();
    }
    if (frozen_copy_.defined() && frozen_copied_ != frozen.version()) {
        frozen_copy_.convert_from(frozen.params());
        frozen_copied_ = frozen.version();
    }
}

// --- modules ----------------------------------------------------------------------

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
    return x.dtype() == DType::i32 ? x.to(l.device) : x.to(l.device, l.compute);
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

#include "levers/nn/layout.hpp"

#include "levers/core/gpu.hpp"
#include "levers/core/rng.hpp"
#include "levers/core/shape_trace.hpp"
#include "levers/nn/module.hpp"

#include <algorithm>
#include <cmath>

namespace levers::nn {

namespace {
// Fills host values `t` (f32 or f64) as `init` says, drawing from `rng`.
void fill(const Tensor& t, const Init& init, Rng& rng) {
    if (shape_tracing()) return;  // a plan lays the model out without writing it
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

void Layout::build(std::uint64_t init_seed, bool reinitialize) {
    const auto named = root_.named_parameters();
    const DType dtype = master_dtype(device.is_cpu() ? compute : DType::f32);
    // Values to keep, on the host, before the buffers go. Weights held in 4 bits have no slot in them.
    std::vector<Tensor> kept(named.size());
    for (std::size_t i = 0; i < named.size(); ++i) {
        Parameter& p = *named[i].second;
        if (p.pending_.defined()) {
            kept[i] = p.pending_.to(Device::cpu(), dtype);
            p.pending_ = Tensor();
        } else if (!reinitialize && p.laid_out_ && p.set_) {
            kept[i] = p.set_->param_tensor(p.id_).to(Device::cpu(), dtype);
        }
    }
    trainable = ParamSet();
    frozen = ParamSet();
    std::vector<int> ids(named.size(), -1);
    for (std::size_t i = 0; i < named.size(); ++i) {
        Parameter& p = *named[i].second;
        if (!p.quant_) ids[i] = (p.trainable_ ? trainable : frozen).add(named[i].first, p.shape_, p.decay_);
    }
    trainable.allocate(dtype, true);
    frozen.allocate(dtype, false);
    Rng rng(init_seed);
    for (std::size_t i = 0; i < named.size(); ++i) {
        Parameter& p = *named[i].second;
        if (p.quant_) continue;
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
                     "a model on the CPU computes in f32 or f64, not {} ({} needs a GPU)", name_of(dtype),
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
    for (const auto& [name, p] : root_.named_parameters())  // 4-bit weights move as they are
        if (p->quantized_ && p->quantized_->device() != to)
            p->quantized_ = std::make_shared<const ops::Quantized4>(p->quantized_->to(to));
    trainable.to_device(to, dtype);  // a compute copy where `dtype` is not `master` (bf16 on a GPU)
    // Frozen weights (LoRA's base) take no optimizer step: on a GPU they are held in the compute dtype alone.
    if (dtype != master)
        frozen.hold_as(to, dtype);
    else
        frozen.to_device(to, dtype);
    device = to;
    compute = dtype;
    bind();
}

void Layout::bind() {
    const auto named = root_.named_parameters();
    int t = 0, f = 0;
    for (const auto& [name, p] : named) {
        if (p->quant_) {  // no slot: its layer computes from the 4-bit codes
            p->set_ = nullptr;
            p->id_ = -1;
            p->compute_ = Tensor();
            continue;
        }
        ParamSet& set = p->trainable_ ? trainable : frozen;
        const int id = p->trainable_ ? t++ : f++;
        p->set_ = &set;
        p->id_ = id;
        p->compute_ = set.compute_tensor(id).detach();
        autograd::Leaf& leaf = *p->leaf_;
        leaf.requires_grad = p->trainable_;
        leaf.set = p->trainable_ ? &trainable : nullptr;
        leaf.entry = p->trainable_ ? id : -1;
        leaf.grad = Tensor();  // bound by backward to where the set keeps it then (a view of the flat buffer)
        if (p->trainable_) p->compute_.set_leaf(p->leaf_);
    }
}

}  // namespace levers::nn

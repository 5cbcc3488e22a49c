#include "framework/core/params.hpp"

namespace levers {

int ParamSet::add(std::string name, Shape shape, bool decay) {
    LEVERS_CHECK(!params_.defined(), "parameter '{}' declared after allocate()", name);
    // Every parameter starts on 16 elements inside the flat buffer: 64 bytes
    // in f32 (vector loads), 128 in f64, 32 in a card's bf16 copy.
    constexpr std::int64_t kAlignElems = 16;
    std::int64_t offset = (size_ + kAlignElems - 1) / kAlignElems * kAlignElems;
    entries_.push_back({std::move(name), shape, offset, decay});
    size_ = offset + shape.numel();
    return static_cast<int>(entries_.size()) - 1;
}

void ParamSet::allocate(DType dtype, bool with_grads) {
    LEVERS_CHECK(dtype == DType::f32 || dtype == DType::f64, "parameters are f32 or f64, not {}", name_of(dtype));
    params_ = Tensor::persistent({size_}, dtype);
    grads_ = Tensor();
    with_grads_ = with_grads;
    grad_dtype_ = dtype;
    grad_shard_ = {};
    ++version_;
}

void ParamSet::to_device(Device device, DType grad_dtype) {
    LEVERS_CHECK(params_.defined(), "to_device() before allocate()");
    LEVERS_CHECK(grad_dtype == dtype() || (grad_dtype == DType::bf16 && !device.is_cpu()),
                 "gradients in {} for {} parameters on {}: only {} there{}", name_of(grad_dtype), name_of(dtype()),
                 device.str(), name_of(dtype()), device.is_cpu() ? "" : ", or bf16");
    if (device != params_.device()) {
        Tensor moved = Tensor::persistent({size_}, dtype(), device);
        moved.copy_from(params_);
        params_ = moved;
    }
    // Gradients already where and as asked are zeroed in place; others are made there at their first use.
    if (grads_.defined() && grads_.device() == device && grads_.dtype() == grad_dtype && !sharded_grads()) {
        grads_.zero();
    } else {
        grads_ = Tensor();
        grad_shard_ = {};
    }
    if (with_grads_) grad_dtype_ = grad_dtype;
    ++version_;
}

void ParamSet::convert(DType dtype) {
    LEVERS_CHECK(params_.defined(), "convert() before allocate()");
    LEVERS_CHECK(dtype == DType::f32 || dtype == DType::f64, "parameters are f32 or f64, not {}", name_of(dtype));
    if (dtype == this->dtype()) return;
    LEVERS_CHECK(device().is_cpu(), "parameters change dtype on the CPU only, not on {}", device().str());
    Tensor converted = Tensor::persistent({size_}, dtype);
    converted.copy_from(params_.to(Device::cpu(), dtype));
    params_ = converted;
    grads_ = Tensor();  // made in the new dtype at first use
    grad_shard_ = {};
    grad_dtype_ = dtype;
    ++version_;
}

Tensor ParamSet::param_tensor(int id) const {
    const Entry& e = entry(id);
    return params_.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

const Tensor& ParamSet::grads() const {
    if (with_grads_ && !grads_.defined() && params_.defined())
        grads_ = Tensor::persistent({sharded_grads() ? grad_shard_.size() : size_}, grad_dtype_, params_.device());
    return grads_;
}

Tensor ParamSet::grad_tensor(int id) const {
    const Entry& e = entry(id);
    LEVERS_CHECK(with_grads_, "parameter '{}' has no gradient (a frozen set)", e.name);
    if (sharded_grads()) return {};
    return grads().slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

Tensor ParamSet::grad_slice(std::int64_t begin, std::int64_t end) const {
    if (!sharded_grads()) return grads().slice(begin, end);
    std::int64_t at = 0;  // where the range's elements start in the compact buffer
    for (const auto& [b, e] : grad_shard_.ranges) {
        if (b <= begin && end <= e) return grads().slice(at + (begin - b), at + (end - b));
        at += e - b;
    }
    LEVERS_FAIL("gradients [{}, {}) are not in this rank's shard", begin, end);
}

void ParamSet::shard_grads(const FlatShard& shard) {
    LEVERS_CHECK(with_grads_, "shard_grads() on a set without gradients");
    LEVERS_CHECK(!shard.ranges.empty() && shard.ranges.back().second <= size_, "a shard of {} elements outside {}",
                 shard.size(), size_);
    grads_ = Tensor();  // the whole buffer goes; the shard's is made at first use
    grad_shard_ = shard;
}

void ParamSet::unshard_grads() {
    if (!sharded_grads()) return;
    grads_ = Tensor();
    grad_shard_ = {};
}

int ParamSet::find(const std::string& name) const {
    for (std::size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].name == name) return static_cast<int>(i);
    return -1;
}

}  // namespace levers

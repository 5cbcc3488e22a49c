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
    grads_ = with_grads ? Tensor::persistent({size_}, dtype) : Tensor();
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
    // Gradients already where and as asked are zeroed in place: a second buffer would double their memory
    // while the model's views still hold the first (a model placed on the CPU it was built on).
    if (grads_.defined() && (grads_.device() != device || grads_.dtype() != grad_dtype))
        grads_ = Tensor::persistent({size_}, grad_dtype, device);
    else if (grads_.defined())
        grads_.zero();
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
    if (grads_.defined()) grads_ = Tensor::persistent({size_}, dtype);
    ++version_;
}

Tensor ParamSet::param_tensor(int id) const {
    const Entry& e = entry(id);
    return params_.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

Tensor ParamSet::grad_tensor(int id) const {
    const Entry& e = entry(id);
    LEVERS_CHECK(grads_.defined(), "parameter '{}' has no gradient (a frozen set)", e.name);
    return grads_.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

int ParamSet::find(const std::string& name) const {
    for (std::size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].name == name) return static_cast<int>(i);
    return -1;
}

}  // namespace levers

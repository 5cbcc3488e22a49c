#include "framework/core/params.hpp"

namespace levers {

template <class T> int ParamSet<T>::add(std::string name, Shape shape, bool decay) {
    LEVERS_CHECK(!params_.defined(), "parameter '{}' declared after allocate()", name);
    // Keep every parameter 64-byte aligned inside the flat buffer (vector loads).
    constexpr std::int64_t kAlignElems = static_cast<std::int64_t>(Arena::kAlign / sizeof(T));
    std::int64_t offset = (size_ + kAlignElems - 1) / kAlignElems * kAlignElems;
    entries_.push_back({std::move(name), shape, offset, decay});
    size_ = offset + shape.numel();
    return static_cast<int>(entries_.size()) - 1;
}

template <class T> void ParamSet<T>::allocate() {
    params_ = Tensor::zeros({size_}, dtype_of<T>());
    grads_ = Tensor::zeros({size_}, dtype_of<T>());
}

template <class T> void ParamSet<T>::to_device(Device device, DType grad_dtype) {
    LEVERS_CHECK(params_.defined(), "to_device() before allocate()");
    LEVERS_CHECK(grad_dtype == dtype_of<T>() || (grad_dtype == DType::bf16 && !device.is_cpu()),
                 "gradients in {} for {} parameters on {}: only {} there{}", name_of(grad_dtype),
                 name_of(dtype_of<T>()), device.str(), name_of(dtype_of<T>()), device.is_cpu() ? "" : ", or bf16");
    params_ = params_.to(device);
    grads_ = Tensor::zeros({size_}, grad_dtype, device);
}

template <class T> Tensor ParamSet<T>::param_tensor(int id) const {
    const Entry& e = entries_[static_cast<std::size_t>(id)];
    return params_.slice(e.offset, e.offset + e.shape.numel()).view(e.shape);
}

template class ParamSet<float>;
template class ParamSet<double>;

}  // namespace levers

// A model's parameters and their gradients, each in one flat contiguous buffer.
//
// Models declare named tensors with add(), then allocate(); every parameter is
// a view into the flat buffer, so the data-parallel layer reduces slices of
// grads() in place and the optimizer sweeps one array.
#pragma once

#include "framework/core/tensor.hpp"

#include <functional>
#include <string>
#include <vector>

namespace levers {

template <class T> class ParamSet {
public:
    struct Entry {
        std::string name;
        Shape shape;
        std::int64_t offset = 0;  // in elements, into the flat buffers
        bool decay = true;        // weight decay applies (matrices, embeddings)
    };

    // Declares a parameter; returns its id. Only before allocate().
    int add(std::string name, Shape shape, bool decay);
    // Creates the zeroed flat buffers.
    void allocate();
    // Moves the parameters to `device` and makes zeroed gradients there; on a
    // card, param()/grad() and the flat tensors are device pointers.
    // `grad_dtype` bf16 (cards only) keeps the gradients in bf16 for a model
    // computing in bf16; the parameters stay in T, the optimizer's master copy.
    void to_device(Device device, DType grad_dtype = dtype_of<T>());
    Device device() const { return params_.device(); }
    DType grad_dtype() const { return grads_.dtype(); }

    T* param(int id) const { return params_.data<T>() + entries_[static_cast<std::size_t>(id)].offset; }
    T* grad(int id) const { return grads_.data<T>() + entries_[static_cast<std::size_t>(id)].offset; }
    // The gradient of `id` in grad_dtype(), whichever it is.
    void* grad_raw(int id) const {
        return static_cast<std::byte*>(grads_.raw()) +
               entries_[static_cast<std::size_t>(id)].offset * static_cast<std::int64_t>(size_of(grads_.dtype()));
    }
    Tensor param_tensor(int id) const;

    const Tensor& params() const { return params_; }  // flat [size()]
    const Tensor& grads() const { return grads_; }    // flat [size()]
    const std::vector<Entry>& entries() const { return entries_; }
    std::int64_t size() const { return size_; }
    void zero_grad() { grads_.zero(); }

    // Models call this during backward once the gradients from element `offset`
    // to the end of the flat buffer are final for this backward pass; the
    // data-parallel layer starts averaging them while backward goes on.
    void grads_final_from(std::int64_t offset) const {
        if (on_final_) on_final_(offset);
    }
    // Who hears about it (empty: nobody).
    void set_grads_final_hook(std::function<void(std::int64_t)> hook) { on_final_ = std::move(hook); }

private:
    std::vector<Entry> entries_;
    std::int64_t size_ = 0;
    Tensor params_, grads_;
    std::function<void(std::int64_t)> on_final_;
};

extern template class ParamSet<float>;
extern template class ParamSet<double>;

}  // namespace levers

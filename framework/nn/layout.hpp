// Where a model's parameters live (nn/module.hpp): the root module's two
// flat buffers (trainable, frozen), their compute copies, and the model's
// device, dtypes and modes. Internal to nn.
#pragma once

#include "framework/core/params.hpp"

#include <cstdint>

namespace levers::nn {

class Module;

class Layout {
public:
    explicit Layout(Module& root) : root_(root) {}

    // Lays every parameter out again in the current device and dtypes.
    // Parameters that had values keep them; the others (all, with
    // `reinitialize`) are initialised in order from one generator of `seed`.
    void build(std::uint64_t seed, bool reinitialize);
    // Moves the buffers and makes the compute copies (Module::to).
    void place(Device device, DType compute);
    // The compute copies catch up with the master values where those changed.
    void refresh();

    ParamSet trainable, frozen;
    Device device;
    DType compute = DType::f32;
    bool valid = false;  // false: lay out again before use
    bool training = true;
    std::uint64_t seed = 0, stream = 0;

private:
    void bind();  // every parameter's views into the current buffers
    Module& root_;
    // In the compute dtype where it differs from the master values' (bf16 on a card).
    Tensor trainable_copy_, frozen_copy_;
    std::uint64_t trainable_copied_ = 0, frozen_copied_ = 0;  // versions copied
};

}  // namespace levers::nn

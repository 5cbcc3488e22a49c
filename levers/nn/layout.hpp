// Where a model's parameters live (levers/nn/module.hpp): the root module's two
// flat buffers (trainable, frozen; each keeps its compute copy), and the
// model's device, dtypes and modes. Internal to nn.
#pragma once

#include "levers/core/params.hpp"

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
    // Moves the buffers, computing in `compute` (Module::to).
    void place(Device device, DType compute);

    ParamSet trainable, frozen;
    Device device;
    DType compute = DType::f32;
    bool valid = false;  // false: lay out again before use
    bool training = true;
    std::uint64_t seed = 0, stream = 0;

private:
    void bind();  // every parameter's views into the current buffers
    Module& root_;
};

}  // namespace levers::nn

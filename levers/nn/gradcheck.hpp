// Finite-difference gradient checks for your own ops and models: the
// gradients backward gives against central differences, in double on the
// CPU (what levers' own tests run on every op and model).
//
//   Tensor x = Tensor::from(values, {3, 4}).to(Device::cpu(), DType::f64);
//   x.requires_grad_();
//   auto report = nn::check_gradients([&] { return my_op(x); }, {x});
//   LEVERS_CHECK(report.passed, "{}", report.str());
#pragma once

#include "levers/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace levers::nn {

class Module;

struct GradCheckReport {
    bool passed = false;
    double worst_error = 0;  // |numeric - analytic| over the largest numeric gradient (at least 1e-3)
    std::string worst_input;  // which input (its index, or a parameter's name) ...
    std::int64_t worst_index = 0;  // ... and element
    double numeric = 0, analytic = 0;
    std::int64_t elements = 0;  // how many were checked
    std::string str() const;
};

// `f` computes a tensor from `inputs` (f64 CPU leaves with requires_grad_()).
// Its output is reduced to one number by a fixed random weighting (so every
// element of a non-scalar output is checked); backward of that is compared
// with (f(x + h) - f(x - h)) / 2h for every element of every input.
GradCheckReport check_gradients(const std::function<Tensor()>& f, const std::vector<Tensor>& inputs,
                                double tolerance = 1e-6, double h = 1e-5);

// The same for every trainable parameter of `model` (moved to f64 on the CPU
// first), `loss` computing its output.
GradCheckReport check_parameter_gradients(Module& model, const std::function<Tensor()>& loss,
                                          double tolerance = 1e-6, double h = 1e-5);

}  // namespace levers::nn

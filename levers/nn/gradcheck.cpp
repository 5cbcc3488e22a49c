#include "levers/nn/gradcheck.hpp"

#include "levers/core/autograd.hpp"
#include "levers/core/rng.hpp"
#include "levers/nn/module.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace levers::nn {

std::string GradCheckReport::str() const {
    return fmt::format("gradient check {}: worst relative error {:.3g} at {} element {} (numeric {:.9g}, analytic "
                       "{:.9g}), {} elements checked",
                       passed ? "passed" : "FAILED", worst_error, worst_input, worst_index, numeric, analytic, elements);
}

namespace {

// One number from f's output: the dot product with fixed weights (0.5 to 1.5, signs mixed).
struct Reduction {
    Tensor weights;
    double value(const Tensor& out) {
        const std::vector<double> v = out.values();
        if (!weights.defined()) {
            Rng rng(7);
            std::vector<double> w(v.size());
            for (double& x : w) x = (rng.uniform() + 0.5) * (rng.uniform() < 0.5 ? -1 : 1);
            weights = Tensor::from(w, out.shape()).to(out.device(), out.dtype());
        }
        const std::vector<double> w = weights.values();
        double s = 0;
        for (std::size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
        return s;
    }
};

// Central differences of `reduce(f())` for each element of `x` (perturbed in place, restored).
void compare(const std::function<Tensor()>& f, Reduction& reduce, const Tensor& x, const Tensor& analytic,
             const std::string& name, double h, double& scale, GradCheckReport& r,
             std::vector<std::pair<double, double>>& pairs, std::vector<std::string>& names,
             std::vector<std::int64_t>& index) {
    LEVERS_CHECK(x.dtype() == DType::f64 && x.device().is_cpu(), "gradient checks run in f64 on the CPU; '{}' is {} on {}",
                 name, name_of(x.dtype()), x.device().str());
    const std::vector<double> a = analytic.defined() ? analytic.values() : std::vector<double>(x.numel(), 0.0);
    double* base = x.data<double>();
    autograd::InferenceMode no_graph;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        // Element i in row-major order, wherever x's strides put it.
        std::int64_t at = 0;
        for (std::int64_t d = x.ndim() - 1, rest = i; d >= 0; --d) {
            at += rest % x.dim(static_cast<int>(d)) * x.stride(static_cast<int>(d));
            rest /= x.dim(static_cast<int>(d));
        }
        double* p = base + at;
        const double saved = *p;
        *p = saved + h;
        const double up = reduce.value(f());
        *p = saved - h;
        const double down = reduce.value(f());
        *p = saved;
        const double numeric = (up - down) / (2 * h);
        scale = std::max(scale, std::abs(numeric));
        pairs.emplace_back(numeric, a[static_cast<std::size_t>(i)]);
        names.push_back(name);
        index.push_back(i);
        ++r.elements;
    }
}

GradCheckReport summarise(const std::vector<std::pair<double, double>>& pairs, const std::vector<std::string>& names,
                          const std::vector<std::int64_t>& index, double scale, double tolerance) {
    GradCheckReport r;
    r.elements = static_cast<std::int64_t>(pairs.size());
    double worst = -1;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        // NaN on either side fails the check (it compares false to everything).
        const double diff = std::abs(pairs[i].first - pairs[i].second);
        const double err = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
        if (err > worst) {
            worst = err;
            r.worst_input = names[i];
            r.worst_index = index[i];
            r.numeric = pairs[i].first;
            r.analytic = pairs[i].second;
        }
    }
    r.worst_error = std::max(0.0, worst) / scale;
    r.passed = r.worst_error <= tolerance;
    return r;
}

}  // namespace

GradCheckReport check_gradients(const std::function<Tensor()>& f, const std::vector<Tensor>& inputs, double tolerance,
                                double h) {
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        LEVERS_CHECK(inputs[k].leaf() && inputs[k].requires_grad(), "check_gradients: input {} is not a leaf with "
                     "requires_grad_()", k);
        if (inputs[k].grad().defined()) inputs[k].grad().zero();
    }
    Reduction reduce;
    const Tensor out = f();
    (void)reduce.value(out);  // fixes the weights
    out.backward(reduce.weights);
    double scale = 1e-3;
    std::vector<std::pair<double, double>> pairs;
    std::vector<std::string> names;
    std::vector<std::int64_t> index;
    GradCheckReport r;
    for (std::size_t k = 0; k < inputs.size(); ++k)
        compare(f, reduce, inputs[k], inputs[k].grad(), fmt::format("input {}", k), h, scale, r, pairs, names, index);
    return summarise(pairs, names, index, scale, tolerance);
}

GradCheckReport check_parameter_gradients(Module& model, const std::function<Tensor()>& loss, double tolerance,
                                          double h) {
    model.to(Device::cpu(), DType::f64);
    ParamSet& params = model.parameters();
    params.zero_grad();
    Reduction reduce;
    const Tensor out = loss();
    (void)reduce.value(out);
    out.backward(reduce.weights);
    const Tensor grads = params.grads().clone();
    double scale = 1e-3;
    std::vector<std::pair<double, double>> pairs;
    std::vector<std::string> names;
    std::vector<std::int64_t> index;
    GradCheckReport r;
    for (std::size_t id = 0; id < params.entries().size(); ++id) {
        const auto& e = params.entries()[id];
        const Tensor analytic = grads.slice(e.offset, e.offset + e.shape.numel());
        compare(loss, reduce, params.param_tensor(static_cast<int>(id)), analytic, e.name, h, scale, r, pairs, names,
                index);
    }
    return summarise(pairs, names, index, scale, tolerance);
}

}  // namespace levers::nn

// The one list of ops that the finite-difference check (CPU, f64), the
// card-against-CPU parity test and the per-op benchmark all run (as ggml's
// test-backend-ops): a new op is one more entry here, with small shapes for
// the checks and a transformer's shapes for the benchmark.
#pragma once

#include "framework/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace levers::testing {

struct OpInput {
    enum class Kind { real, ids, targets };  // floats; token ids below `limit`; targets below it (one ignored row)
    Shape shape;
    Kind kind = Kind::real;
    std::int64_t limit = 0;
    double scale = 1.0;  // reals: normal(0, 1) times this
};

struct OpCase {
    std::string name;
    std::vector<OpInput> inputs;        // small, for the checks
    std::vector<OpInput> bench_inputs;  // a transformer's shapes (GPT-2 small, batch 4 x 256), for the benchmark
    std::function<Tensor(const std::vector<Tensor>&)> run;
    // The same function through other kernels, where this op has none on the
    // CPU (the fused attention is checked against the unfused).
    std::function<Tensor(const std::vector<Tensor>&)> cpu_reference;
    double bf16_tolerance = 5e-2;  // relative error of outputs and gradients in bf16 on a card
};

const std::vector<OpCase>& op_cases();

// Random inputs for `specs` in `dtype` (reals; ids and targets stay i32) on
// `device`, the same values for the same seed whatever the dtype.
std::vector<Tensor> make_inputs(const std::vector<OpInput>& specs, DType dtype, Device device, std::uint64_t seed);

// ‖a - b‖ / ‖b‖ over all elements (0 for two empty tensors).
double relative_error(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace levers::testing

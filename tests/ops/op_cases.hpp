// The one list of ops that the finite-difference check (CPU, f64), the
// GPU-against-CPU parity test and the per-op benchmark all run (as ggml's
// test-backend-ops): a new op is one more entry here, with small shapes for
// the checks and a transformer's shapes for the benchmark. Inputs may be
// laid out as views (transposed, strided), so every op is checked on
// non-contiguous operands too, and broadcast by giving them other shapes.
#pragma once

#include "levers/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace levers::testing {

struct OpInput {
    enum class Kind {
        real,      // normal(0, 1) · scale
        positive,  // |normal| · scale + 0.5: log, sqrt, the divisor of div
        unit,      // uniform in (0, 1): probabilities, binary targets
        ids,       // i32 token ids below `limit`
        targets,   // i32 targets below `limit`, one row ignored (-100)
        mask,      // bool, about half true
    };
    // How the input lies in memory: contiguous; the transpose of a
    // contiguous tensor (its last two dimensions swapped); or every other
    // element of a tensor twice as wide along the last dimension.
    enum class Layout { contiguous, transposed, strided };
    Shape shape;
    Kind kind = Kind::real;
    std::int64_t limit = 0;
    double scale = 1.0;
    Layout layout = Layout::contiguous;
    // Whether the checks differentiate it (floats only).
    bool differentiable() const { return kind == Kind::real || kind == Kind::positive || kind == Kind::unit; }
};

struct OpCase {
    std::string name;
    std::vector<OpInput> inputs;        // small, for the checks
    std::vector<OpInput> bench_inputs;  // a transformer's shapes (GPT-2 small, batch 4 x 256), for the benchmark
    std::function<Tensor(const std::vector<Tensor>&)> run;
    // The same function through other kernels, where this op has none on the
    // CPU (the fused attention is checked against the unfused).
    std::function<Tensor(const std::vector<Tensor>&)> cpu_reference;
    double bf16_tolerance = 5e-2;  // relative error of outputs and gradients in bf16 on a GPU
};

const std::vector<OpCase>& op_cases();

// Random inputs for `specs` in `dtype` (floats; ids, targets and masks keep
// theirs) on `device`, laid out as each spec says, the same values for the
// same seed whatever the dtype.
std::vector<Tensor> make_inputs(const std::vector<OpInput>& specs, DType dtype, Device device, std::uint64_t seed);

// ‖a - b‖ / ‖b‖ over all elements (0 for two empty tensors); of two lengths, an error.
double relative_error(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace levers::testing

// Every op of the op list (tests/ops/op_cases.cpp), through autograd, against
// central finite differences in f64 on the CPU.
#include "levers/core/dispatch.hpp"
#include "levers/nn/gradcheck.hpp"
#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::testing;

TEST_CASE("every op's gradients through autograd match finite differences (f64, CPU)") {
    int checked = 0;
    for (const OpCase& c : op_cases()) {
        std::vector<Tensor> in = make_inputs(c.inputs, DType::f64, Device::cpu(), 1);
        std::vector<Tensor> leaves;
        for (std::size_t k = 0; k < in.size(); ++k)
            if (c.inputs[k].differentiable()) leaves.push_back(in[k].requires_grad_());
        if (!has_kernel(c.name.substr(0, c.name.find(' ')).c_str(), Device::Kind::cpu, DType::f64) && c.cpu_reference) {
            MESSAGE(c.name << ": no CPU kernel; the GPU parity test checks it against its reference");
            continue;
        }
        const auto report = nn::check_gradients([&] { return c.run(in); }, leaves);
        INFO(c.name << ": " << report.str());
        CHECK(report.passed);
        CHECK(report.elements > 0);
        ++checked;
    }
    CHECK(checked + 1 == static_cast<int>(op_cases().size()));  // all but the GPU-only fused attention
}

// Every op of the op list (tests/ops/op_cases.cpp) alone, at a transformer's
// shapes (GPT-2 small, batch 4 x 256 tokens), on the CPU or a GPU: the
// median time of its forward (in inference mode) and of forward plus
// backward. One JSON object per op; an op the device has no kernel for says
// so. The same list the gradient checks and the GPU parity test run.
//
//   bench_ops [--device cpu|cuda] [--dtype f32|bf16] [--threads N] [--repeats N] [--small]
#include "levers/core/autograd.hpp"
#include "levers/core/device_memory.hpp"
#include "levers/core/dispatch.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/threads.hpp"
#include "tests/ops/op_cases.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

using namespace levers;

namespace {
double median_ms(int repeats, Device device, const std::function<void()>& fn) {
    std::vector<double> ms;
    for (int i = 0; i < repeats + 1; ++i) {
        const auto start = std::chrono::steady_clock::now();
        fn();
        if (!device.is_cpu()) device_synchronize();
        if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("Times every op of levers' op list, forward and forward + backward", "bench_ops");
    std::string device_name = "cpu", dtype_name = "f32";
    int threads = 1, repeats = 5;
    bool small = false;
    app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    app.add_option("--dtype", dtype_name, "f32 or bf16 (GPUs)")->check(CLI::IsMember({"f32", "bf16"}));
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--repeats", repeats, "timed calls per op (the median is reported)")->check(CLI::PositiveNumber);
    app.add_flag("--small", small, "the checks' small shapes instead of a transformer's");
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    Device device = Device::cpu();
    if (device_name == "cuda") {
        if (gpu_count() == 0) {
            fmt::print(stderr, "bench_ops: no CUDA GPU is visible\n");
            return 1;
        }
        use_gpu(0);
        device = Device::cuda(0);
    }
    const DType dtype = dtype_name == "bf16" ? DType::bf16 : DType::f32;
    for (const testing::OpCase& c : testing::op_cases()) {
        const auto& specs = small ? c.inputs : c.bench_inputs;
        nlohmann::json row = {{"op", c.name}, {"device", device.str()}, {"dtype", dtype_name}};
        try {
            std::vector<Tensor> in = testing::make_inputs(specs, dtype, device, 1);
            row["forward_ms"] = median_ms(repeats, device, [&] {
                autograd::InferenceMode inference;
                (void)c.run(in);
            });
            for (std::size_t k = 0; k < in.size(); ++k)
                if (specs[k].differentiable()) in[k].requires_grad_();
            const Tensor probe = c.run(in);
            const Tensor upstream = Tensor::full(probe.shape(), 0.01, probe.dtype(), device);
            row["forward_backward_ms"] = median_ms(repeats, device, [&] { c.run(in).backward(upstream); });
        } catch (const MissingKernel& e) {
            row["missing"] = e.message();
        }
        fmt::print("{}\n", row.dump());
        std::fflush(stdout);
    }
    return 0;
}

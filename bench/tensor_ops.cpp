// The general ops' memory speed on one CPU thread, against the machine's own
// bounds measured in the same run: a broadcast add writing 64 MiB ([rows,
// cols] + [cols]) against memcpy of 64 MiB (both read and write the same
// bytes), and sums over 64 MiB (everything; along rows; down columns)
// against a plain loop that only reads the bytes (the least a reduction must
// do). The peers use the tensors' own memory. One JSON object per line.
//
//   bench_tensor_ops [--threads N] [--repeats N]
#include "levers/core/threads.hpp"
#include "levers/nn/nn.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

using namespace levers;

namespace {
double median_ms(int repeats, const std::function<void()>& fn) {
    std::vector<double> ms;
    for (int i = 0; i < repeats + 2; ++i) {
        const auto start = std::chrono::steady_clock::now();
        fn();
        if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Reads every float once into four vectors of 16 partial sums each (no
// chain of dependent adds limits it): the least a reduction must do.
float read_all(const float* p, std::int64_t n) {
    using V = float __attribute__((vector_size(64)));
    V acc[4] = {};
    std::int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; ++k) {
            V v;
            std::memcpy(&v, p + i + 16 * k, sizeof v);
            acc[k] += v;
        }
    float s = 0;
    for (; i < n; ++i) s += p[i];
    const V total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (int k = 0; k < 16; ++k) s += total[k];
    return s;
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("The general ops' memory speed against memcpy and a plain read", "bench_tensor_ops");
    int threads = 1, repeats = 9;
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--repeats", repeats, "timed calls (the median is reported)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    autograd::InferenceMode inference;
    constexpr std::int64_t kRows = 16384, kCols = 1024;  // 64 MiB of f32
    const double mib = kRows * kCols * 4.0 / (1 << 20);
    const Tensor a = Tensor::full({kRows, kCols}, 0.5, DType::f32), row = Tensor::full({kCols}, 0.25, DType::f32);
    Tensor out = Tensor::empty({kRows, kCols}, DType::f32);
    const Tensor copy_to = Tensor::full({kRows, kCols}, 0.0, DType::f32);
    volatile float sink = 0;

    // The peers read and write tensors' own bytes, so both sides use memory laid out alike.
    const double memcpy_ms =
        median_ms(repeats, [&] { std::memcpy(copy_to.data<float>(), a.data<float>(), static_cast<std::size_t>(a.numel()) * 4); });
    const double add_ms = median_ms(repeats, [&] { out = a + row; });
    const double read_ms = median_ms(repeats, [&] { sink = read_all(a.data<float>(), a.numel()); });
    const double sum_ms = median_ms(repeats, [&] { sink = static_cast<float>(ops::sum(a).item()); });
    const double rows_ms = median_ms(repeats, [&] { out = ops::sum(a, {1}); });
    const double cols_ms = median_ms(repeats, [&] { out = ops::sum(a, {0}); });
    const auto gbs = [&](double bytes_mib, double ms) { return bytes_mib / 1024 / (ms / 1000); };
    auto row_of = [&](const char* op, double ms, const char* peer, double peer_ms, double moved_mib) {
        return nlohmann::json{{"op", op},         {"ms", ms},       {"gb_per_s", gbs(moved_mib, ms)},
                              {"peer", peer},     {"peer_ms", peer_ms}, {"ratio", peer_ms / ms},
                              {"threads", threads}, {"mib", mib}};
    };
    fmt::print("{}\n", row_of("broadcast add [16384, 1024] + [1024]", add_ms, "memcpy", memcpy_ms, 2 * mib).dump());
    fmt::print("{}\n", row_of("sum (all)", sum_ms, "read", read_ms, mib).dump());
    fmt::print("{}\n", row_of("sum along rows [16384, 1024] -> [16384]", rows_ms, "read", read_ms, mib).dump());
    fmt::print("{}\n", row_of("sum down columns [16384, 1024] -> [1024]", cols_ms, "read", read_ms, mib).dump());
    return sink > 0 ? 0 : 0;
}

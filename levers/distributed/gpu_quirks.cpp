#include "levers/distributed/gpu_quirks.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>

namespace levers::dist {

const std::vector<GpuQuirk>& gpu_quirks() {
    static const std::vector<GpuQuirk> table = {
        {"RTX PRO 6000", "NCCL_P2P_DISABLE", "1", 0,
         "peer-to-peer transfers between RTX PRO 6000 (Blackwell) GPUs hang; NCCL goes through host memory"},
        {"RTX PRO 6000", "", "", 22600,
         "NCCL before 2.26 has no kernels for Blackwell workstation GPUs: the first collective fails with "
         "\"Cuda failure 1 'invalid argument'\" after the rings connect"},
    };
    return table;
}

std::string nccl_version_text(int code) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older ones major*1000 + minor*100 + patch.
    if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
    return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

QuirkPlan plan_quirks(const std::vector<std::string>& device_names, int nccl_version,
                      const std::function<const char*(const char*)>& read_env) {
    QuirkPlan plan;
    std::vector<std::string> applied;
    for (const auto& q : gpu_quirks()) {
        std::string matched;
        for (const auto& name : device_names)
            if (name.find(q.gpu) != std::string::npos) matched = name;
        if (matched.empty()) continue;
        if (q.min_nccl > 0)
            LEVERS_CHECK(nccl_version >= q.min_nccl,
                         "{} needs NCCL {} or newer, but NCCL {} is loaded ({}); install a newer NCCL (Debian/Ubuntu: "
                         "the libnccl2 and libnccl-dev packages from NVIDIA's CUDA repository, {} or later) or point "
                         "LD_LIBRARY_PATH at one",
                         matched, nccl_version_text(q.min_nccl), nccl_version_text(nccl_version), q.why,
                         nccl_version_text(q.min_nccl));
        if (q.env.empty()) continue;
        if (const char* set = read_env(q.env.c_str()); set != nullptr) {
            plan.kept.push_back(fmt::format("{}={} (yours)", q.env, set));
            continue;
        }
        plan.set.emplace_back(q.env, q.value);
        applied.push_back(fmt::format("{}={} ({})", q.env, q.value, q.why));
    }
    if (!applied.empty() || !plan.kept.empty()) {
        std::vector<std::string> parts = applied;
        parts.insert(parts.end(), plan.kept.begin(), plan.kept.end());
        plan.line = fmt::format("GPU quirks: {}", fmt::join(parts, "; "));
    }
    return plan;
}

void apply_quirks(const QuirkPlan& plan) {
    for (const auto& [name, value] : plan.set) ::setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
    if (!plan.line.empty()) {
        fmt::print("{}\n", plan.line);
        std::fflush(stdout);
    }
}

}  // namespace levers::dist

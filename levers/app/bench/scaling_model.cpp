#include "levers/app/bench/scaling_model.hpp"

#include "levers/core/error.hpp"

#include <algorithm>

namespace levers::bench {

const std::vector<Interconnect>& profiles() {
    static const std::vector<Interconnect> all = {
        {"nvlink-h100", 360, 3,
         "NVLink 4 gives an H100/H200 SXM 900 GB/s in total, 450 GB/s each way (NVIDIA H100 datasheet); NCCL's "
         "all_reduce_perf reaches about 360 GB/s bus bandwidth on 8 of them (NVIDIA's published nccl-tests runs)"},
        {"pcie5-p2p", 40, 10,
         "PCIe 5.0 x16 is 64 GB/s each way (PCI-SIG); GPU-to-GPU copies with peer-to-peer reach about 50 GB/s and "
         "NCCL's ring about 40 GB/s bus bandwidth"},
        {"pcie-nop2p", 12, 20,
         "with peer-to-peer disabled (NCCL_P2P_DISABLE=1) NCCL stages every chunk through host memory (its SHM "
         "transport): two copies over PCIe per hop, about a quarter of the P2P figure in practice"},
    };
    return all;
}

const Interconnect& profile(const std::string& name) {
    for (const auto& p : profiles())
        if (p.name == name) return p;
    std::string names;
    for (const auto& p : profiles()) names += (names.empty() ? "" : ", ") + p.name;
    LEVERS_FAIL("unknown interconnect profile '{}'; built in: {} (or give --bandwidth and --latency)", name, names);
}

Prediction predict(const Workload& w, const Interconnect& link, int gpus) {
    LEVERS_CHECK(gpus >= 1, "a prediction needs at least one GPU, got {}", gpus);
    LEVERS_CHECK(w.step_seconds > 0, "the one-GPU step time must be positive, got {}", w.step_seconds);
    LEVERS_CHECK(w.overlap >= 0 && w.overlap <= 1, "overlap must be in 0..1, got {}", w.overlap);
    Prediction p;
    p.gpus = gpus;
    const double n = gpus;
    if (gpus > 1)
        p.comm_seconds = 2 * (n - 1) / n * w.grad_bytes / (link.bandwidth_gb_s * 1e9) + 2 * (n - 1) * link.latency_us * 1e-6;
    p.exposed_seconds = (1 - w.overlap) * p.comm_seconds;
    const double compute = w.fixed_global_batch ? w.step_seconds / n : w.step_seconds;
    p.step_seconds = compute + p.exposed_seconds;
    p.speedup = (w.fixed_global_batch ? w.step_seconds : n * w.step_seconds) / p.step_seconds;
    p.efficiency = p.speedup / n;
    return p;
}

}  // namespace levers::bench

// A model of data-parallel scaling: what N GPUs do with one GPU's step time,
// the gradient bytes averaged per step and an interconnect.
//
// Per step, ring all-reduce moves 2(n-1)/n x bytes over each GPU's link and
// pays 2(n-1) latencies; the part of it that overlaps backward is hidden:
//
//   comm(n)    = 2(n-1)/n x bytes / bandwidth + 2(n-1) x latency
//   exposed(n) = (1 - overlap) x comm(n)
//
// With the same per-GPU batch, N GPUs do N times the work per step:
//   speedup(n) = n x t1 / (t1 + exposed(n))
// With a fixed global batch (the total work split over the GPUs):
//   speedup(n) = t1 / (t1 / n + exposed(n))
#pragma once

#include <string>
#include <vector>

namespace levers::bench {

struct Interconnect {
    std::string name;
    double bandwidth_gb_s = 0;  // per GPU, each direction, as all-reduce achieves it (bus bandwidth)
    double latency_us = 0;      // per ring hop
    std::string source;         // where the figures come from
};

// The built-in profiles: nvlink-h100, pcie5-p2p, pcie-nop2p. Throws
// levers::Error listing them for an unknown name.
const std::vector<Interconnect>& profiles();
const Interconnect& profile(const std::string& name);

struct Workload {
    double step_seconds = 0;  // one GPU's step
    double grad_bytes = 0;    // averaged per step
    double overlap = 0;       // fraction of communication hidden behind backward, 0..1
    bool fixed_global_batch = false;
};

struct Prediction {
    int gpus = 1;
    double comm_seconds = 0, exposed_seconds = 0, step_seconds = 0, speedup = 1, efficiency = 1;
};

Prediction predict(const Workload& w, const Interconnect& link, int gpus);

}  // namespace levers::bench

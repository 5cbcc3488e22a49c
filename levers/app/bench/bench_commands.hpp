// `recipe bench`: how a recipe scales over GPUs, the two shapes of multi-GPU
// work compared, and a model that predicts what a node of real GPUs would do.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace levers::bench {

struct ScalingFlags {
    std::string recipe;
    std::vector<int> gpus;            // empty: powers of two up to the node's GPUs
    long steps = 60, warmup = 10;
    std::vector<std::string> sets;
    long global_batch = 0;            // > 0: the global batch stays fixed (the recipe's global_batch)
    int threads = 1;                  // per rank (CPU)
    double price = 0;                 // per GPU-hour; 0: no cost columns
    long total_steps = 0;             // one GPU's steps to price (0: the recipe's default steps)
    std::string out;
    std::string precision = "f32";    // every run's --precision
};
int bench_scaling(const ScalingFlags& f);

struct ShapesFlags {
    std::string recipe;
    int cells = 2;
    long steps = 60;
    std::vector<std::string> sets;
    std::string out;
};
int bench_shapes(const ShapesFlags& f);

struct PredictFlags {
    std::string recipe;               // measured when step_ms / grad_mb / overlap are not given
    std::string profile = "pcie-nop2p";
    std::vector<int> gpus = {2, 4, 8};
    double bandwidth_gb_s = 0, latency_us = -1;  // override the profile's
    double step_ms = 0, grad_mb = 0, overlap = -1;
    bool bf16_gradients = false;
    bool fixed_global_batch = false;
    std::vector<std::string> sets;
    std::string out;
};
int bench_predict(const PredictFlags& f);

// The seeds' measured fine-tune (RTX PRO 6000, shared memory, P2P off) next to
// the model's figures under the stated assumptions.
int bench_predict_seeds();

}  // namespace levers::bench

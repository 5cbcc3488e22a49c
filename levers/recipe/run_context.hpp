// What a run is beyond its parameters, handed to the recipe inside its Config
// (cfg.run()): what models compute in on a GPU, whether the device was left
// to --device auto, the run directory and the checkpoint it resumes from.
// `recipe run` makes it once per process, before the recipe starts; nothing
// changes it later (the loop's CPU fallback runs on a copy).
#pragma once

#include "levers/core/dtype.hpp"

#include <filesystem>

namespace levers {

struct RunContext {
    DType compute = DType::f32;    // --precision: what models compute in on a GPU
    bool device_auto = false;      // --device auto: a model needing an op the GPU lacks trains on the CPU instead
    std::filesystem::path dir;     // the run directory (empty: none, as in unit tests)
    std::filesystem::path resume;  // the checkpoint this run resumes from (empty: none)
    // --set micro_batch=auto's choice, made once by whoever starts the job
    // (0: none): the recipe's micro-batch parameter, and the loop's grad_accum.
    long micro_batch = 0, grad_accum = 0;
};

}  // namespace levers

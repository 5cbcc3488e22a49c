#include "framework/core/model_move.hpp"

#include "framework/core/error.hpp"
#include "framework/core/gpu.hpp"

namespace levers {

bool needs_move_to_card(const char* model, Device from, DType current, Device to, DType compute, DType params) {
    if (to.is_cpu()) {
        LEVERS_CHECK(from.is_cpu() && compute != DType::bf16,
                     "{} computes in {} on the CPU (bf16 needs a card) and cannot move back from {}", model,
                     name_of(params), from.str());
        return false;
    }
    if (to == from) {
        LEVERS_CHECK(compute == current, "{} on {} computes in {}; it cannot switch to {}", model, to.str(),
                     name_of(current), name_of(compute));
        return false;
    }
    LEVERS_CHECK(from.is_cpu(), "{} on {} cannot move to {}", model, from.str(), to.str());
    LEVERS_CHECK(compute == DType::f32 || compute == DType::bf16, "{} on a card computes in f32 or bf16, not {}",
                 model, name_of(compute));
    LEVERS_CHECK(built_with_cuda(),
                 "{} on {}: this build of levers has no CUDA backend (nvcc was not found when it was configured)",
                 model, to.str());
    LEVERS_CHECK(params == DType::f32, "{} of {} runs on the CPU only; cards run f32 (or bf16 from f32 master weights)",
                 model, name_of(params));
    return true;
}

}  // namespace levers

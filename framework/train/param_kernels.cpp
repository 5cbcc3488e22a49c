#include "framework/train/param_kernels.hpp"

#include "kernels/grad_clip.hpp"

#include <cstring>

namespace levers::train {

void scale_grads(ParamSet& params, float s) { ops::scale_(params.grads(), s); }

double clip_grad_norm(ParamSet& params, double max_norm) { return ops::clip_grad_norm(params.grads(), max_norm); }

std::vector<kernels::AdamWChunk> adamw_chunks(const ParamSet& params) {
    std::vector<kernels::AdamWChunk> out;
    for (const auto& e : params.entries()) kernels::append_adamw_chunks(out, e.offset, e.shape.numel(), e.decay);
    return out;
}

Tensor adamw_chunk_table(const ParamSet& params) {
    static_assert(sizeof(kernels::AdamWChunk) == 4 * sizeof(std::int32_t), "a chunk is four i32");
    const auto chunks = adamw_chunks(params);
    Tensor host = Tensor::persistent({static_cast<std::int64_t>(chunks.size()) * 4}, DType::i32);
    if (!chunks.empty()) std::memcpy(host.raw(), chunks.data(), host.bytes());
    if (params.device().is_cpu()) return host;
    Tensor card = Tensor::persistent(host.shape(), DType::i32, params.device());
    card.copy_from(host);
    return card;
}

}  // namespace levers::train

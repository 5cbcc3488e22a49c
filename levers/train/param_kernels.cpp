#include "levers/train/param_kernels.hpp"

#include "levers/distributed/context.hpp"
#include "levers/kernels/grad_clip.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace levers::train {

void scale_grads(ParamSet& params, float s) { ops::scale_(params.grads(), s); }

double clip_grad_norm(ParamSet& params, double max_norm) { return ops::clip_grad_norm(params.grads(), max_norm); }

double clip_grad_norm(ParamSet& params, const FlatShard& shard, double max_norm) {
    if (shard.covers(params.size())) return clip_grad_norm(params, max_norm);
    std::vector<double> sum_sq{0.0};
    for (const auto& [b, e] : shard.ranges) {
        const double part = ops::clip_grad_norm(params.grad_slice(b, e), 0);  // the norm only
        sum_sq[0] += part * part;
    }
    dist::all_reduce_sum(sum_sq);
    const double norm = std::sqrt(sum_sq[0]);
    if (max_norm > 0 && norm > max_norm) {
        const double s = max_norm / (norm + 1e-6);  // the whole buffer's factor (levers/kernels/cpu/grad_clip.cpp)
        for (const auto& [b, e] : shard.ranges) ops::scale_(params.grad_slice(b, e), s);
    }
    return norm;
}

std::vector<kernels::AdamWChunk> adamw_chunks(const ParamSet& params, std::int64_t begin, std::int64_t end) {
    std::vector<kernels::AdamWChunk> out;
    for (const auto& e : params.entries()) {
        const std::int64_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.shape.numel());
        if (lo < hi) kernels::append_adamw_chunks(out, lo - begin, hi - lo, e.decay);
    }
    return out;
}

Tensor adamw_chunk_table(const ParamSet& params, std::int64_t begin, std::int64_t end) {
    static_assert(sizeof(kernels::AdamWChunk) == 4 * sizeof(std::int32_t), "a chunk is four i32");
    const auto chunks = adamw_chunks(params, begin, end);
    Tensor host = Tensor::persistent({static_cast<std::int64_t>(chunks.size()) * 4}, DType::i32);
    if (!chunks.empty()) std::memcpy(host.raw(), chunks.data(), host.bytes());
    if (params.device().is_cpu()) return host;
    Tensor gpu = Tensor::persistent(host.shape(), DType::i32, params.device());
    gpu.copy_from(host);
    return gpu;
}

}  // namespace levers::train

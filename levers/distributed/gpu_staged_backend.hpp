// Host-memory collectives carried by a group that works on GPU memory
// (NCCL): each buffer is copied to the GPU, reduced or gathered there, and
// copied back. What a job across nodes uses for its losses, metrics, texts
// and checkpoint gathers, where no shared memory joins its ranks (PyTorch's
// NCCL-only process groups do the same). Small messages, so the copies cost
// little; gradients never take this path.
#pragma once

#include "levers/distributed/backend.hpp"

#include <cstddef>
#include <memory>

namespace levers::dist {

class GpuStagedBackend final : public Backend {
public:
    // `GPUs` must outlive this backend and work on GPU memory.
    explicit GpuStagedBackend(Backend& gpus);

    int rank() const override { return gpus_.rank(); }
    int world_size() const override { return gpus_.world_size(); }
    std::string name() const override { return gpus_.name() + " (host buffers staged through the GPU)"; }

    using Backend::all_gather;
    using Backend::all_reduce;
    using Backend::reduce_scatter;
    void barrier() override { gpus_.barrier(); }
    void all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override;
    void broadcast(void* data, std::size_t bytes, int root) override;
    void all_gather(void* out, const void* in, std::int64_t n, DType dtype) override;
    void reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) override;
    void abort(const std::string& why) override { gpus_.abort(why); }
    Timing timing() const override { return gpus_.timing(); }

private:
    std::byte* stage(std::size_t bytes);  // GPU memory of at least `bytes`, kept for the next call

    Backend& gpus_;
    std::shared_ptr<std::byte> buffer_;
    std::size_t capacity_ = 0;
};

}  // namespace levers::dist

// What the models' card engines (gpt_cuda, mlp_cuda) share about computing in
// a storage type S: a ParamSet's weights as S (the f32 parameters themselves,
// or a bf16 copy refreshed from them before each forward, the f32 ones
// staying the optimizer's master weights), its gradients as S, and arrays of
// S brought to the host as f32. CUDA builds only.
#pragma once

#include "framework/core/device_memory.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/params.hpp"
#include "kernels/cuda/ops.hpp"

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace levers::models {

inline cudaStream_t card_stream() { return static_cast<cudaStream_t>(compute_stream()); }

template <class S> class CardWeights {
public:
    explicit CardWeights(ParamSet<float>* set) : set_(set) {
        if constexpr (!std::is_same_v<S, float>)
            if (set_) copy_ = device_alloc(static_cast<std::size_t>(set_->size()) * sizeof(S));
    }
    // Before a forward: the bf16 copy catches up with the master weights.
    void refresh() const {
        if constexpr (!std::is_same_v<S, float>)
            if (set_)
                kernels::cuda::convert(reinterpret_cast<S*>(copy_.get()), set_->params().data<float>(),
                                       set_->size(), card_stream());
    }
    S* at(int id) const {
        if constexpr (std::is_same_v<S, float>)
            return set_->param(id);
        else
            return reinterpret_cast<S*>(copy_.get()) + set_->entries()[static_cast<std::size_t>(id)].offset;
    }
    S* grad(int id) const { return static_cast<S*>(set_->grad_raw(id)); }

private:
    ParamSet<float>* set_;
    std::shared_ptr<std::byte> copy_;
};

// rows x cols values of S on the card, rows `ld` apart, into `out` on the
// host as f32 with rows `cols` apart (waits for the card).
template <class S>
void copy_to_host(std::vector<float>& out, const S* card, std::size_t rows, std::size_t cols, std::size_t ld) {
    using Raw = std::conditional_t<std::is_same_v<S, float>, float, std::uint16_t>;  // bf16 as its bits
    std::vector<Raw> raw(rows * ld);
    device_copy(raw.data(), card, raw.size() * sizeof(Raw));
    out.resize(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
            const Raw x = raw[r * ld + c];
            if constexpr (std::is_same_v<S, float>)
                out[r * cols + c] = x;
            else
                out[r * cols + c] = bf16_to_float(x);
        }
}

}  // namespace levers::models

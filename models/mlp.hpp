// MLP classifier: linear → GELU → … → linear → softmax cross-entropy.
#pragma once

#include "framework/core/arena.hpp"
#include "framework/core/params.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace levers::models {

class MlpCard;

struct MlpConfig {
    int inputs = 784;
    std::vector<int> hidden = {256, 128};
    int classes = 10;

    void validate() const;  // throws levers::Error naming the bad field
};

template <class T> class Mlp {
public:
    // Weights U(-1/√fan_in, 1/√fan_in) like PyTorch's nn.Linear; zero biases.
    Mlp(const MlpConfig& config, std::uint64_t seed);

    // x[batch, inputs] → logits[batch, classes]; with labels also the mean loss.
    // x is not copied: it must stay valid until backward().
    T forward(const T* x, const std::int32_t* labels, std::int64_t batch);
    // Adds d(loss)/d(params) into params().grads(). Needs a forward with labels.
    void backward();

    // Moves the parameters to `device`; on a card forward and backward run
    // there (models/mlp_cuda) and params() holds card memory. Mlp<float>
    // only. `compute` bf16: bf16 weights, activations and gradients, f32
    // sums, the f32 parameters kept as master weights.
    void to_device(Device device, DType compute = DType::f32);
    Device device() const { return params_.device(); }

    const T* logits() const;  // on the host wherever the model runs
    ParamSet<T>& params() { return params_; }
    const MlpConfig& config() const { return config_; }

private:
    void ensure_activations(std::int64_t batch);

    MlpConfig config_;
    ParamSet<T> params_;
    std::vector<int> weight_ids_, bias_ids_;
    std::vector<int> widths_;  // inputs, hidden..., classes

    Arena arena_;
    std::int64_t batch_ = 0;
    const T* x_ = nullptr;
    std::vector<T*> pre_, post_;  // per hidden layer: before and after GELU
    T *logits_ = nullptr, *lse_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr;
    std::vector<std::int32_t> labels_;
    bool has_labels_ = false;
    std::shared_ptr<MlpCard> cuda_;  // set by to_device(a card)
    DType compute_ = dtype_of<T>();
};

extern template class Mlp<float>;
extern template class Mlp<double>;

}  // namespace levers::models

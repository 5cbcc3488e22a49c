// Randomly generated compositions of modules (sequences, residual branches,
// linear layers with and without bias, layernorm, GELU, dropout while
// training, LoRA adapters) checked against finite differences in f64: every
// parameter's gradient and the input's.
#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace levers;

namespace {

// Appends random layers of width `w` to `seq`, `depth` levels of nesting deep at most.
void grow(nn::Sequential& seq, std::int64_t w, int depth, Rng& rng) {
    const int n = 1 + static_cast<int>(rng.below(3));
    for (int i = 0; i < n; ++i) {
        switch (rng.below(depth > 0 ? 6 : 5)) {
            case 0: seq.add<nn::Linear>(w, w, rng.below(2) == 0); break;
            case 1: seq.add<nn::LayerNorm>(w); break;
            case 2: seq.add<nn::GELU>(); break;
            case 3: seq.add<nn::Dropout>(0.25); break;
            case 4: {
                auto& l = seq.add<nn::Linear>(w, w);
                if (rng.below(2)) l.attach_lora(2, 3.0);
                break;
            }
            default: grow(seq.add<nn::Residual>(), w, depth - 1, rng); break;
        }
    }
}

}  // namespace

TEST_CASE("random compositions of modules: gradients of every parameter and of the input match finite differences") {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        Rng rng(seed);
        const std::int64_t w = 3 + static_cast<std::int64_t>(rng.below(3));
        nn::Sequential net;
        net.add<nn::Linear>(4, w);
        grow(net, w, 2, rng);
        net.add<nn::Linear>(w, 3);
        net.initialize(seed);
        net.to(Device::cpu(), DType::f64);
        // Larger values than the initialisation gives, so every path carries signal.
        double* p = net.parameters().params().data<double>();
        for (std::int64_t i = 0; i < net.parameters().size(); ++i) p[i] += rng.normal() * 0.3;
        std::vector<double> xs(2 * 4);
        for (double& x : xs) x = rng.normal();
        const Tensor x = Tensor::from(xs, {2, 4}).requires_grad_();
        const Tensor labels = Tensor::from(std::vector<std::int32_t>{2, 0}, {2});
        auto loss = [&] { return ops::cross_entropy(net(x), labels); };
        // Dropout draws a new mask each call: the same one for every evaluation here.
        const nlohmann::json state = net.save_state();
        auto same_mask = [&] {
            net.load_state(state);
            return loss();
        };
        INFO("composition " << seed << ": " << net.named_parameters().size() << " parameters");
        const auto params = nn::check_parameter_gradients(net, same_mask);
        INFO(params.str());
        CHECK(params.passed);
        const auto input = nn::check_gradients(same_mask, {x});
        INFO(input.str());
        CHECK(input.passed);
    }
}

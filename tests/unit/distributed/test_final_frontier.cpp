// DDP's frontier over a real backward: the autograd engine's calls become
// "every gradient from this offset on is final", from the end of the buffer.
#include "levers/distributed/grad_sync.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>

using namespace levers;

namespace {

std::unique_ptr<nn::Sequential> three_layers() {
    auto net = std::make_unique<nn::Sequential>();
    net->add<nn::Linear>(4, 4);
    net->add<nn::GELU>();
    net->add<nn::Linear>(4, 4);
    net->add<nn::Linear>(4, 3, /*bias=*/false);
    net->initialize(1);
    return net;
}

std::vector<std::int64_t> frontiers_of(nn::Sequential& net, const Tensor& x) {
    ParamSet& params = net.parameters();
    std::vector<std::int64_t> heard;
    dist::FinalFrontier frontier(params, [&](std::int64_t from) { heard.push_back(from); });
    params.set_grad_hooks(&frontier);
    const Tensor loss = ops::cross_entropy(net(x), Tensor::from(std::vector<std::int32_t>{0, 2}, {2}));
    loss.backward();
    params.set_grad_hooks(nullptr);
    return heard;
}

}  // namespace

TEST_CASE("FinalFrontier: offsets only go down, the last layer's first, everything at the end") {
    auto net = three_layers();
    const Tensor x = Tensor::from(std::vector<float>(8, 0.5f), {2, 4});
    const auto heard = frontiers_of(*net, x);
    const ParamSet& params = net->parameters();
    REQUIRE(!heard.empty());
    CHECK(std::is_sorted(heard.rbegin(), heard.rend()));
    CHECK(heard.back() == 0);
    CHECK(heard.front() == params.entries().back().offset);
    // Twice: each backward starts its own frontier.
    CHECK(frontiers_of(*net, x) == heard);
}

TEST_CASE("FinalFrontier: parameters a pass does not use are final from its start") {
    auto net = three_layers();
    ParamSet& params = net->parameters();
    std::vector<std::int64_t> heard;
    dist::FinalFrontier frontier(params, [&](std::int64_t from) { heard.push_back(from); });
    params.set_grad_hooks(&frontier);
    // Only the first layer: the two later ones are final before backward runs any node.
    const Tensor x = Tensor::from(std::vector<float>(8, 0.5f), {2, 4});
    const Tensor loss = ops::sum((*net)[0](x));
    loss.backward();
    params.set_grad_hooks(nullptr);
    REQUIRE(heard.size() >= 2);
    CHECK(heard.front() == params.entries()[2].offset);  // layers 2 and 3 at once, at planning
    CHECK(heard.back() == 0);
}

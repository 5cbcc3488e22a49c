// Modules: names, the flat layout in forward order, freezing and LoRA on any
// model, decay groups, initialisers, moving between dtypes, dropout's modes
// and state, and what is refused.
#include "levers/core/rng.hpp"
#include "levers/nn/nn.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

using namespace levers;

namespace {

struct Block : nn::Layer {
    nn::LayerNorm norm;
    nn::Linear fc;
    nn::Dropout drop;
    explicit Block(std::int64_t width, double p = 0)
        : norm(*this, "norm", width), fc(*this, "fc", width, width), drop(*this, "drop", p) {}
    Tensor forward(const Tensor& x) override { return x + drop(fc(ops::gelu(norm(x)))); }
};

struct Net : nn::Layer {
    nn::Embedding embed;
    nn::ModuleList<Block> blocks;
    nn::Linear head;
    explicit Net(double p = 0)
        : embed(*this, "embed", 10, 6, nn::init::normal(0.5)), blocks(*this, "blocks", 2, 6, p),
          head(*this, "head", 6, 4) {
        initialize(3);
    }
    Tensor forward(const Tensor& tokens) override {
        Tensor h = embed(tokens);
        for (Block& b : blocks) h = b(h);
        return head(h);
    }
};

Tensor token_batch() { return Tensor::from(std::vector<std::int32_t>{1, 2, 3, 9, 0, 4}, {2, 3}); }
Tensor labels() { return Tensor::from(std::vector<std::int32_t>{0, 1, 2, 3, 0, 1}, {6}); }
Tensor loss_of(Net& net) { return ops::cross_entropy(net(token_batch()), labels()); }

}  // namespace

TEST_CASE("modules: hierarchical names in forward order, one flat buffer, decay for matrices only") {
    Net net;
    std::vector<std::string> names;
    for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"embed.weight", "blocks.0.norm.weight", "blocks.0.norm.bias",
                                            "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.norm.weight",
                                            "blocks.1.norm.bias", "blocks.1.fc.weight", "blocks.1.fc.bias",
                                            "head.weight", "head.bias"});
    const ParamSet& params = net.parameters();
    CHECK(params.entries().size() == names.size());
    for (std::size_t i = 0; i + 1 < params.entries().size(); ++i)
        CHECK(params.entries()[i].offset < params.entries()[i + 1].offset);
    CHECK(params.entries()[0].decay);        // embedding
    CHECK_FALSE(params.entries()[1].decay);  // gain
    CHECK(params.entries()[3].decay);        // matrix
    CHECK_FALSE(params.entries()[4].decay);  // bias
    // Views into the flat buffer: a parameter's values are the buffer's.
    CHECK(net.head.weight.value().raw() == static_cast<float*>(params.params().raw()) + params.entries()[9].offset);
    CHECK(net.blocks[1].fc.full_name() == "blocks.1.fc");
    net.head.bias->set_decay(true);  // a decay group of one's own choosing
    CHECK(net.parameters().entries().back().decay);
}

TEST_CASE("modules: initialisers: gains at one, biases at zero, the same values from the same seed") {
    Net a, b;
    CHECK(a.parameters().params().values() == b.parameters().params().values());
    const auto gain = a.blocks[0].norm.weight.value().values();
    CHECK(std::all_of(gain.begin(), gain.end(), [](double g) { return g == 1; }));
    const auto bias = a.head.bias->value().values();
    CHECK(std::all_of(bias.begin(), bias.end(), [](double g) { return g == 0; }));
    const auto w = a.head.weight.value().values();  // U(±1/√6)
    CHECK(std::all_of(w.begin(), w.end(), [](double x) { return std::abs(x) <= 1 / std::sqrt(6.0); }));
    a.initialize(4);
    CHECK(a.parameters().params().values() != b.parameters().params().values());
    CHECK(nn::init::uniform(-1, 1).describe() == "uniform(-1, 1)");
}

TEST_CASE("modules: freezing lays the model out again, keeping values; frozen parameters get no gradient") {
    Net net;
    const auto before = net.blocks[0].fc.weight.value().values();
    net.embed.freeze();
    CHECK(net.parameters().entries().size() == 10);
    CHECK(net.frozen_parameters().entries().size() == 1);
    CHECK(net.blocks[0].fc.weight.value().values() == before);
    net.parameters().zero_grad();
    loss_of(net).backward();
    const auto g = net.parameters().grads().values();
    CHECK(std::any_of(g.begin(), g.end(), [](double x) { return x != 0; }));
    net.embed.freeze(false);
    CHECK(net.parameters().entries().size() == 11);
}

TEST_CASE("modules: LoRA adapters attach to any Linear by name, train alone, and merge into the same function") {
    Net net;
    const int attached = nn::attach_lora(net, 2, 4.0, 9, {"fc"});
    CHECK(attached == 2);
    CHECK(net.parameters().entries().size() == 4);  // A and B of two layers
    CHECK(net.parameters().entries()[0].name == "blocks.0.fc.lora_a");
    // B = 0: the function has not changed; then it does, and merging keeps it.
    Rng rng(5);
    float* p = net.parameters().params().data<float>();
    for (std::int64_t i = 0; i < net.parameters().size(); ++i) p[i] = static_cast<float>(rng.normal() * 0.3);
    net.parameters_changed();
    autograd::InferenceMode inference;
    const double adapted = loss_of(net).item();
    nn::merge_lora(net);
    CHECK(loss_of(net).item() == doctest::Approx(adapted).epsilon(1e-5));
    CHECK_THROWS_WITH_AS(nn::attach_lora(net, 2, 4.0, 9, {"fc"}), doctest::Contains("already has LoRA"), Error);
    Net other;
    CHECK_THROWS_WITH_AS(nn::attach_lora(other, 2, 4.0, 9, {"attn.c_attn"}),
                         doctest::Contains("LoRA target 'attn.c_attn' names no Linear layer of this model; its "
                                           "layers are "),
                         Error);
    // One target of another family's among good ones is refused too, before any adapter is attached.
    CHECK_THROWS_WITH_AS(nn::attach_lora(other, 2, 4.0, 9, {"fc", "qkv_proj"}),
                         doctest::Contains("LoRA target 'qkv_proj' names no Linear layer"), Error);
    CHECK_FALSE(nn::has_lora(other));
}

TEST_CASE("modules: dropout only while training, the same masks from the same seed and state, other ranks others") {
    Net net(0.5);
    net.parameters().zero_grad();
    const Tensor a = net(token_batch());
    const Tensor b = net(token_batch());  // the next call draws another mask
    CHECK(a.values() != b.values());
    const nlohmann::json state = net.save_state();
    CHECK(state.contains("blocks.0.drop"));
    const Tensor c = net(token_batch());
    net.load_state(state);
    CHECK(net(token_batch()).values() == c.values());  // resumed: the same mask as before
    net.set_stream(1);                            // another rank
    net.load_state(state);
    CHECK(net(token_batch()).values() != c.values());
    net.eval();
    CHECK(net(token_batch()).values() == net(token_batch()).values());
    net.train();
    CHECK(net.training());
}

TEST_CASE("modules: to() converts the model, keeping values; what is refused names the module") {
    Net net;
    const auto before = net.parameters().params().values();
    net.to(Device::cpu(), DType::f64);
    CHECK(net.parameters().dtype() == DType::f64);
    CHECK(net.parameters().params().values() == before);
    CHECK(net.on_device(Tensor::zeros({2}, DType::f32)).dtype() == DType::f64);
    CHECK(net.on_device(token_batch()).dtype() == DType::i32);
    net.to(Device::cpu());
    CHECK(net.parameters().params().values() == before);
    nn::Linear lone(3, 2);
    CHECK_THROWS_WITH_AS(net.register_module("lone", net.head), doctest::Contains("registered twice"), Error);
    (void)lone.parameters();  // laid out as a model of its own
    CHECK_THROWS_WITH_AS(net.register_module("lone", lone), doctest::Contains("laid out as a model of its own"), Error);
    CHECK_THROWS_WITH_AS(net.blocks[0].initialize(1), doctest::Contains("only the model (the root module)"), Error);
    CHECK_THROWS_WITH_AS(nn::Dropout(1.0), doctest::Contains("dropout p must be in [0, 1)"), Error);
}

TEST_CASE("modules: an optimizer refuses a model laid out again after it was made") {
    Net net;
    // (train::AdamW lives above nn; the check is that the flat buffer it holds changes.)
    const void* before = net.parameters().params().raw();
    nn::attach_lora(net, 1, 1.0, 1, {"head"});
    CHECK(net.parameters().params().raw() != before);
}

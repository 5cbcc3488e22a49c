// Activation checkpointing (levers/nn/checkpoint.hpp) on GPT and Llama: bitwise the
// gradients of the plain forward, dropout included, listeners told what
// data parallelism needs, and the activations' peak lower.
#include "levers/core/params.hpp"
#include "levers/core/storage_pool.hpp"
#include "levers/models/gpt.hpp"
#include "levers/models/llama.hpp"

#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <cstring>

using namespace levers;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
    return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

Tensor tokens(std::int64_t batch, std::int64_t time, int vocab, int salt) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(batch * time));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>((i * 7 + salt) % vocab);
    return Tensor::from(t, {batch, time});
}

// Two steps' forward and backward: each step's loss and gradients, bitwise the same.
template <class Model> void check_same_gradients(Model& plain, Model& checkpointed, int vocab) {
    checkpointed.checkpoint_blocks();
    for (int step = 0; step < 2; ++step) {
        CAPTURE(step);
        const Tensor x = tokens(2, 8, vocab, step), y = tokens(2, 8, vocab, step + 1);
        plain.params().zero_grad();
        checkpointed.params().zero_grad();
        const Tensor a = plain.loss(x, y), b = checkpointed.loss(x, y);
        a.backward();
        b.backward();
        CHECK(a.item() == b.item());
        CHECK(same_bits(plain.params().grads(), checkpointed.params().grads()));
    }
}

// Records the listener's calls and each gradient as it was declared final.
struct Recorder final : GradHooks {
    explicit Recorder(ParamSet& p) : params(p) {}
    void backward_begins() override { computed.assign(params.entries().size(), 0); }
    void will_compute(int e) override { computed[static_cast<std::size_t>(e)] = 1; }
    void planned() override {}
    void grad_final(int e, Tensor& grad) override {
        CHECK(grad.raw() == params.grad_tensor(e).raw());  // the engine hands over the entry's gradient itself
        at_final.emplace_back(e, grad.clone());
    }
    ParamSet& params;
    std::vector<char> computed;
    std::vector<std::pair<int, Tensor>> at_final;
};

}  // namespace

TEST_CASE("checkpointed GPT blocks give bitwise the gradients of the plain forward, dropout on") {
    const models::GptConfig cfg{.vocab_size = 50, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                                .dropout = 0.1};
    models::Gpt plain(cfg, 7), checkpointed(cfg, 7);
    check_same_gradients(plain, checkpointed, 50);
}

TEST_CASE("checkpointed Llama layers give bitwise the gradients of the plain forward") {
    const models::LlamaConfig c = testing::tiny_llama({.context = 16, .tied = false});
    models::Llama plain(c, 3), checkpointed(c, 3);
    check_same_gradients(plain, checkpointed, 40);
}

TEST_CASE("with checkpointed blocks, the gradient listener hears every parameter computed, and final only once its "
          "gradient is complete") {
    const models::GptConfig cfg{.vocab_size = 50, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16};
    models::Gpt model(cfg, 5);
    model.checkpoint_blocks();
    ParamSet& params = model.params();
    Recorder hooks(params);
    params.set_grad_hooks(&hooks);
    params.zero_grad();
    model.loss(tokens(2, 8, 50, 0), tokens(2, 8, 50, 1)).backward();
    params.set_grad_hooks(nullptr);
    for (char c : hooks.computed) CHECK(c == 1);
    REQUIRE(hooks.at_final.size() == params.entries().size());
    for (const auto& [entry, grad] : hooks.at_final) {
        CAPTURE(params.entry(entry).name);
        CHECK(same_bits(grad, params.grad_tensor(entry)));  // nothing added after it was declared final
    }
}

TEST_CASE("checkpointed blocks hold a fraction of the plain forward's activations at the peak") {
    const models::GptConfig cfg{.vocab_size = 64, .block_size = 64, .n_layer = 6, .n_head = 4, .n_embd = 64};
    auto peak = [&](bool checkpoint) {
        models::Gpt model(cfg, 1);
        model.checkpoint_blocks(checkpoint);
        const Tensor x = tokens(8, 64, 64, 0), y = tokens(8, 64, 64, 1);
        model.loss(x, y).backward();  // lays the model out, sizes the tape
        cpu_pool().release_cached();  // the pool is the process's: measure from empty
        cpu_pool().reset_peak();
        model.loss(x, y).backward();
        return model.activation_bytes();
    };
    const std::size_t plain = peak(false), checkpointed = peak(true);
    CAPTURE(plain);
    CAPTURE(checkpointed);
    CHECK(checkpointed < plain / 2);
}

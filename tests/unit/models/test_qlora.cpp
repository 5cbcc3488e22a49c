// QLoRA on the tiny Llama: its Linear weights quantized as they are read
// compute what the same model computes with those weights replaced by their
// dequantized values; the 4-bit base is held in about a quarter of bf16's
// bytes; LoRA's adapters train on it and merge into a full-precision model;
// what cannot be done with a 4-bit weight is refused, naming it.
#include "levers/nn/lora.hpp"
#include "levers/nn/quantize.hpp"
#include "levers/train/optimizer.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::testing;

namespace {

Tensor tokens(std::int64_t batch, std::int64_t time, int vocab, int salt) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(batch * time));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>((i * 7 + salt * 3 + i / 5) % vocab);
    return Tensor::from(t, {batch, time});
}

// The largest relative difference between two tensors' values.
double max_relative(const Tensor& a, const Tensor& b) {
    const auto x = a.values(), y = b.values();
    REQUIRE(x.size() == y.size());
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        scale = std::max(scale, std::abs(y[i]));
        diff = std::max(diff, std::abs(x[i] - y[i]));
    }
    return diff / scale;
}

}  // namespace

TEST_CASE("a Llama quantized as it loads computes what its dequantized weights compute (nf4 and fp4)") {
    TempDir tmp;
    const auto dir = save_tiny_llama(tmp.path() / "tiny", tiny_llama({.tied = false}), 5);
    const Tensor x = tokens(2, 9, 40, 0);
    for (const auto type : {Quant4Type::nf4, Quant4Type::fp4})
        for (const bool dq : {true, false}) {
            CAPTURE(ops::name_of(type));
            CAPTURE(dq);
            const ops::Quant4Spec spec{.type = type, .double_quant = dq};
            auto q = models::load_hf_model(dir, Device::cpu(), DType::f32,
                                           [&](models::Llama& m) { CHECK(nn::hold_linears_in_4bit(m, spec) == 14); });
            auto ref = models::load_hf_model(dir);
            for (nn::Linear* l : nn::linear_layers(*ref))
                if (l->name() != "lm_head")
                    l->weight.value().copy_from(ops::dequantize_4bit(ops::quantize_4bit(l->weight.value(), spec), DType::f32));
            ref->parameters_changed();
            CHECK(max_relative(q->logits(x), ref->logits(x)) < 1e-6);
            // Embeddings, norms and the head stay in f32; every projection is in 4 bits, not in the buffers.
            const auto held = nn::held_in_4bit(*q);
            CHECK(held.values == 2 * (32 * 32 * 2 + 16 * 32 * 2 + 48 * 32 * 3));  // q, o; k, v; gate, up, down
            CHECK(q->frozen_parameters().size() + q->params().size() + held.values ==
                  ref->frozen_parameters().size() + ref->params().size());
            CHECK(static_cast<double>(held.bytes) <= 0.30 * 2 * static_cast<double>(held.values));
            // The quantized model differs from the full-precision one, but little.
            const double off = max_relative(q->logits(x), models::load_hf_model(dir)->logits(x));
            CHECK(off > 0);
            CHECK(off < 0.2);
        }
}

TEST_CASE("QLoRA: adapters on a 4-bit base train as over the full-precision one; merging gives a full-precision model") {
    TempDir tmp;
    const auto dir = save_tiny_llama(tmp.path() / "tiny", tiny_llama(), 6);
    // Every next token is 7: what adapters on a frozen random model learn in a few steps (down to about 3.09,
    // where the tiny embeddings' norms leave it; from ln 40 = 3.69).
    const Tensor x = tokens(4, 12, 40, 1), y = Tensor::from(std::vector<std::int32_t>(48, 7), {4, 12});
    // 60 AdamW steps of rank-8 adapters on every projection: the first and last losses.
    auto train = [&](models::Llama& model) {
        train::AdamW adamw(model.params(), {.lr = 1e-1});
        std::pair<double, double> loss;
        for (int step = 0; step < 60; ++step) {
            model.params().zero_grad();
            const Tensor l = model.loss(x, y);
            l.backward();
            adamw.step(1e-1);
            (step == 0 ? loss.first : loss.second) = l.item();
        }
        return loss;
    };
    auto lora = models::load_hf_model(dir, Device::cpu(), DType::f32,
                                      [](models::Llama& m) { nn::attach_lora(m, 8, 16, 1, {"all-linear"}); });
    auto model = models::load_hf_model(dir, Device::cpu(), DType::f32, [](models::Llama& m) {
        nn::attach_lora(m, 8, 16, 1, {"all-linear"});
        nn::hold_linears_in_4bit(m, {});
    });
    CHECK(nn::has_4bit_weights(*model));
    for (const auto& [name, p] : model->named_parameters()) CHECK(p->trainable() == (p->name().starts_with("lora_")));
    const auto full = train(*lora), quantized = train(*model);
    MESSAGE("LoRA " << full.first << " -> " << full.second << ", QLoRA " << quantized.first << " -> " << quantized.second);
    CHECK(quantized.second < quantized.first - 0.5);
    CHECK(std::abs(quantized.second - full.second) < 0.05);
    const Tensor before = model->logits(x);
    nn::merge_lora(*model);
    CHECK_FALSE(nn::has_4bit_weights(*model));
    CHECK(max_relative(model->logits(x), before) < 1e-5);
}

TEST_CASE("4-bit weights refuse what cannot be done with them, naming the weight") {
    TempDir tmp;
    const auto dir = save_tiny_llama(tmp.path() / "tiny", tiny_llama(), 7);
    auto model = models::load_hf_model(dir, Device::cpu(), DType::f32,
                                       [](models::Llama& m) { nn::hold_linears_in_4bit(m, {}); });
    nn::Parameter& w = nn::linear_layers(*model)[0]->weight;
    CHECK_THROWS_WITH(w.value(), doctest::Contains("is held in 4 bits (nf4): it has no full-precision values"));
    CHECK_THROWS_WITH(w.set_trainable(true), doctest::Contains("frozen weights in 4 bits do not train"));
    CHECK_THROWS_WITH(w.hold_in_4bit({}), doctest::Contains("is held in 4 bits already"));
    // Full precision again on demand: the dequantized values.
    w.dequantize();
    CHECK(w.value().shape() == w.shape());
}

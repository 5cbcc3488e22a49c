// QLoRA on the tiny Llama: its Linear weights quantized as they are read
// compute what the same model computes with those weights replaced by their
// dequantized values; the 4-bit base is held in about a quarter of bf16's
// bytes; LoRA's adapters train on it and merge into a full-precision model;
// what cannot be done with a 4-bit weight is refused, naming it.
#include "levers/data/safetensors.hpp"
#include "levers/models/bnb_4bit.hpp"
#include "levers/nn/lora.hpp"
#include "levers/nn/quantize.hpp"
#include "levers/train/optimizer.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>

using namespace levers;
using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

Tensor qlora_tokens(std::int64_t batch, std::int64_t time, int vocab, int salt) {
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
    const Tensor x = qlora_tokens(2, 9, 40, 0);
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
    const Tensor x = qlora_tokens(4, 12, 40, 1), y = Tensor::from(std::vector<std::int32_t>(48, 7), {4, 12});
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

namespace {

fs::path bnb_fixture(const std::string& kind) { return source_path("tests/fixtures/tiny_bnb/" + kind); }

// A copy of fixture `kind` in `dir`, its config.json and tensors changed by `edit` (tensors as read: u8 and f32).
fs::path edited_copy(const fs::path& dir, const std::string& kind,
                     const std::function<void(nlohmann::json&, std::map<std::string, Tensor>&)>& edit) {
    fs::create_directories(dir);
    auto config = nlohmann::json::parse(std::ifstream(bnb_fixture(kind) / "config.json"));
    const auto file = data::SafeTensorsFile::open(bnb_fixture(kind) / "model.safetensors");
    std::map<std::string, Tensor> tensors;
    for (const auto& [name, t] : file.tensors()) tensors[name] = t.dtype == "U8" ? t.to_u8() : t.to_f32();
    edit(config, tensors);
    std::ofstream(dir / "config.json") << config.dump(2);
    data::write_safetensors(dir / "model.safetensors", {tensors.begin(), tensors.end()});
    return dir;
}

}  // namespace

TEST_CASE("a directory saved by bitsandbytes in 4 bits loads as it is: the codes levers quantizes to, the same "
          "logits; written back as bitsandbytes writes it") {
    // Double quantization takes out the absmax' mean: levers' is rounded once from the exact sum, PyTorch's f32
    // sum (bitsandbytes') in an order that depends on the machine's vector width; the two may differ in the last
    // bit, and so may the nested absmax, and values, after them.
    const auto same_float = [](float a, float b) { return std::abs(a - b) <= 2.5e-7f * std::max(1.0f, std::abs(b)); };
    const Tensor x = qlora_tokens(2, 7, 40, 3);
    for (const auto& [kind, spec] : {std::pair{std::string("nf4"), ops::Quant4Spec{.type = Quant4Type::nf4}},
                                     std::pair{std::string("fp4"), ops::Quant4Spec{.type = Quant4Type::fp4, .double_quant = false}}}) {
        CAPTURE(kind);
        auto stored = models::load_hf_model(bnb_fixture(kind));
        CHECK(nn::held_in_4bit(*stored).values == 32 * 32 * 2 + 16 * 32 * 2 + 48 * 32 * 3);
        auto quantized = models::load_hf_model(bnb_fixture("f32"), Device::cpu(), DType::f32,
                                               [&](models::Llama& m) { nn::hold_linears_in_4bit(m, spec); });
        const Tensor a = stored->logits(x), b = quantized->logits(x);
        CHECK(max_relative(a, b) <= (spec.double_quant ? 1e-6 : 0));
        // Saved in 4 bits: bitsandbytes' tensors, the fixture's bytes.
        TempDir tmp;
        models::save_hf_model(tmp.path() / "saved", *quantized, {.quantize = spec});
        const auto ours = data::SafeTensorsFile::open(tmp.path() / "saved" / "model.safetensors");
        const auto theirs = data::SafeTensorsFile::open(bnb_fixture(kind) / "model.safetensors");
        REQUIRE(ours.tensors().size() == theirs.tensors().size());
        for (const auto& [name, t] : theirs.tensors()) {
            CAPTURE(name);
            REQUIRE(ours.tensors().count(name));
            const auto& o = ours.tensors().at(name);
            CHECK(o.dtype == t.dtype);
            if (name.find(".quant_state.") != std::string::npos) {  // the same JSON, written its own way
                const auto json = [](const data::StoredTensor& s) {
                    return nlohmann::json::parse(reinterpret_cast<const char*>(s.data),
                                                 reinterpret_cast<const char*>(s.data) + s.bytes);
                };
                auto mine = json(o), want = json(t);
                if (want.contains("nested_offset")) {
                    CHECK(same_float(mine["nested_offset"].get<float>(), want["nested_offset"].get<float>()));
                    mine.erase("nested_offset");
                    want.erase("nested_offset");
                }
                CHECK(mine == want);
                continue;
            }
            CHECK(o.shape == t.shape);
            if (name.ends_with(".nested_absmax")) {
                for (std::int64_t i = 0; i < t.shape.numel(); ++i) {
                    float u, v;
                    std::memcpy(&u, o.data + 4 * i, 4);
                    std::memcpy(&v, t.data + 4 * i, 4);
                    CHECK(same_float(u, v));
                }
                continue;
            }
            CHECK((o.bytes == t.bytes && std::memcmp(o.data, t.data, t.bytes) == 0));
        }
        CHECK(nlohmann::json::parse(std::ifstream(tmp.path() / "saved" / "config.json"))["quantization_config"]
                  ["bnb_4bit_quant_type"] == kind);
        CHECK(models::load_hf_model(tmp.path() / "saved")->logits(x).values() == b.values());
        // Saved without quantize: full precision, no quantization_config.
        models::save_hf_model(tmp.path() / "full", *stored);
        CHECK_FALSE(nlohmann::json::parse(std::ifstream(tmp.path() / "full" / "config.json")).contains("quantization_config"));
        CHECK(models::load_hf_model(tmp.path() / "full")->logits(x).values() == a.values());
    }
}

TEST_CASE("a 4-bit directory that is not what bitsandbytes saves is refused, naming the file, tensor and setting") {
    TempDir tmp;
    const std::string q = "model.layers.0.self_attn.q_proj.weight";
    int n = 0;
    const auto refused = [&](const std::string& kind, const std::function<void(nlohmann::json&, std::map<std::string, Tensor>&)>& edit,
                             const std::string& message) {
        const fs::path dir = edited_copy(tmp.path() / std::to_string(n++), kind, edit);
        CHECK_THROWS_WITH(models::check_hf_dir(dir), doctest::Contains(message.c_str()));
        CHECK_THROWS_WITH(models::load_hf_model(dir), doctest::Contains(message.c_str()));
    };
    refused("nf4", [](auto& c, auto&) { c["quantization_config"]["quant_method"] = "gptq"; },
            "config.json: quantization_config's quant_method is \"gptq\"; levers reads bitsandbytes' 4-bit weights");
    refused("nf4", [](auto& c, auto&) { c["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}}; },
            "quantization_config is bitsandbytes' 8-bit (load_in_8bit)");
    refused("nf4", [](auto& c, auto&) { c["quantization_config"]["bnb_4bit_quant_type"] = "int4"; },
            "bnb_4bit_quant_type: unknown 4-bit type 'int4'; valid are nf4 and fp4");
    refused("nf4", [&](auto&, auto& t) { t.erase(q + ".absmax"); }, "no tensor '" + q + ".absmax'");
    refused("nf4", [&](auto&, auto& t) { t.erase(q + ".quant_state.bitsandbytes__nf4"); },
            "4-bit weight '" + q + "' has no quant_state");
    refused("fp4", [&](auto&, auto& t) { t[q + ".absmax"] = t[q + ".absmax"].slice(0, 15); },
            "tensor '" + q + ".absmax' is F32 [15]; '" + q + "' (1024 values in blocks of 64) needs 16 values of F32");
    refused("nf4", [&](auto& c, auto&) { c.erase("quantization_config"); },
            "tensor '" + q + "' is stored in 4 bits, but config.json has no quantization_config");
    refused("fp4", [&](auto&, auto& t) { t[q + ".quant_map"] = t["model.layers.0.mlp.up_proj.weight.quant_map"] * 0.5; },
            "'" + q + ".quant_map' is not FP4's code book");
}

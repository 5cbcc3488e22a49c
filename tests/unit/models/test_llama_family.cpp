// Tiny models of each model_type levers reads, in Hugging Face's directory
// layout (tests/reference/hf/: llama with llama3 rope scaling and tied
// embeddings, mistral with a sliding window in bf16 shards, qwen2 with q/k/v
// biases in f32 shards, qwen3 with q/k norms and its own head_dim in bf16,
// smollm3 with a layer without rotary embeddings in bf16 shards, gemma2 with
// soft caps and a sliding layer in f32, gemma3_text with q/k norms, a sliding
// layer of its own rope base and linear rope scaling on the global one in bf16
// shards, phi3 with fused projections, a partial rotation, longrope scaling and
// a sliding window in f32 shards, mixtral's experts with the load-balancing
// loss in f32 shards, qwen3_moe's experts not renormalised around a dense layer
// in bf16), against PyTorch computing what transformers computes
// (tests/reference/hf_models.py, float64, its output committed beside them):
// logits, loss, gradients and a greedy continuation with the KV cache; then
// written back and read again, tensor for tensor.
#include "levers/core/autograd.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "levers/nn/lora.hpp"
#include "tests/hf_reference.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"

#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

using namespace levers;
using levers::testing::ids;
using levers::testing::reference;
using levers::testing::reference_dir;
using levers::testing::relative_error;
namespace fs = std::filesystem;

namespace {

// Logits, loss and gradients of the directory's model computing in `dtype` on the CPU.
void check_forward_backward(const std::string& name, DType dtype, double tolerance) {
    CAPTURE(name);
    CAPTURE(name_of(dtype));
    const nlohmann::json ref = reference(name);
    auto model = models::load_hf_model(reference_dir() / name, Device::cpu(), dtype);
    const Tensor tokens = ids(ref["tokens"], ref["shape"]), targets = ids(ref["targets"], ref["shape"]);
    {
        autograd::InferenceMode inference;
        CHECK(relative_error(model->logits(tokens).values(), ref["logits"].get<std::vector<double>>()) <= tolerance);
    }
    model->params().zero_grad();
    const Tensor loss = model->loss(tokens, targets);
    if (ref.contains("aux_loss")) {  // a mixture of experts: the load-balancing loss and each token's experts
        const double aux = ref["aux_loss"];
        CHECK(std::abs(model->aux_loss().item() - aux) <= tolerance * aux);
        std::vector<std::vector<double>> experts;
        for (models::LlamaLayer& layer : model->model.layers)
            if (layer.moe) experts.push_back(layer.moe->choices().to(DType::f64).values());
        CHECK(experts == ref["experts"].get<std::vector<std::vector<double>>>());
    }
    loss.backward();
    CHECK(std::abs(loss.item() - ref["loss"].get<double>()) <= tolerance * ref["loss"].get<double>());
    const ParamSet& set = model->params();
    int compared = 0;
    for (const auto& [param, p] : model->weights()) {
        CAPTURE(param);
        REQUIRE(ref["grad_sum_squares"].contains(param));
        const std::vector<double> g = set.grad_tensor(set.find(param)).values();
        double squares = 0;
        for (double v : g) squares += v * v;
        const double want = ref["grad_sum_squares"][param];
        CHECK(std::abs(squares - want) <= 2 * tolerance * want);
        if (ref["grads"].contains(param)) {
            CHECK(relative_error(g, ref["grads"][param].get<std::vector<double>>()) <= tolerance);
            ++compared;
        }
        ++compared;
    }
    CHECK(compared == static_cast<int>(ref["grad_sum_squares"].size() + ref["grads"].size()));
}

}  // namespace

constexpr const char* kModelTypes[] = {"llama",  "mistral",     "qwen2", "qwen3",   "smollm3",
                                       "gemma2", "gemma3_text", "phi3",  "mixtral", "qwen3_moe"};

TEST_CASE("every model type from HF directories matches transformers' maths: logits, loss, grads") {
    for (const char* name : kModelTypes) {
        check_forward_backward(name, DType::f64, 1e-10);
        check_forward_backward(name, DType::f32, 2e-5);
    }
}

TEST_CASE("generation with the KV cache: the prompt once, then one position per step, as recomputing does") {
    for (const char* name : kModelTypes) {
        CAPTURE(name);
        const nlohmann::json ref = reference(name);
        auto model = models::load_hf_model(reference_dir() / name);
        autograd::InferenceMode inference;
        std::vector<std::int32_t> tokens = ref["greedy"]["prompt"].get<std::vector<std::int32_t>>();
        const std::size_t prompt = tokens.size();
        models::LlamaCache cache = model->new_cache(16);
        // Past longrope's original length a forward turns every position by the long factors, while the cache
        // keeps the keys the short ones turned (transformers' generation too, the reference's greedy continuation).
        const auto& scaling = model->config().rope_scaling;
        const std::size_t recomputes_alike = scaling && scaling->kind == nn::RopeScaling::Kind::longrope
                                                 ? static_cast<std::size_t>(scaling->original_max_position_embeddings)
                                                 : ref["greedy"]["tokens"].size();
        Tensor step = Tensor::from(tokens, {1, static_cast<std::int64_t>(tokens.size())});
        while (tokens.size() < ref["greedy"]["tokens"].size()) {
            const Tensor logits = model->next_logits(step, cache);
            // The same logits as the whole sequence recomputed.
            const Tensor full = model->logits(Tensor::from(tokens, {1, static_cast<std::int64_t>(tokens.size())}));
            const Tensor last = full.narrow(1, full.dim(1) - 1, 1).reshape({1, -1});
            if (tokens.size() <= recomputes_alike) CHECK(relative_error(logits.values(), last.values()) <= 1e-5);
            if (tokens.size() > recomputes_alike) CHECK(relative_error(logits.values(), last.values()) > 1e-5);
            tokens.push_back(static_cast<std::int32_t>(ops::argmax(logits, -1).to(DType::f64).item()));
            step = Tensor::from(std::vector<std::int32_t>{tokens.back()}, {1, 1});
        }
        CHECK(cache.length() == static_cast<std::int64_t>(tokens.size() - 1));
        CHECK(tokens == ref["greedy"]["tokens"].get<std::vector<std::int32_t>>());
        CHECK(prompt == 4);
        // generate() through the model's decoder: top-k 1 is greedy.
        Rng rng(1);
        const auto generated = models::generate(*model, ref["greedy"]["prompt"].get<std::vector<std::int32_t>>(),
                                                {.max_new_tokens = 6, .top_k = 1}, rng);
        CHECK(generated == ref["greedy"]["tokens"].get<std::vector<std::int32_t>>());
    }
}

TEST_CASE("a directory written back holds the same tensors, bit for bit, in shards of the size asked") {
    for (const char* name : kModelTypes) {
        CAPTURE(name);
        const fs::path source = reference_dir() / name;
        auto model = models::load_hf_model(source);
        testing::TempDir dir;
        const fs::path one = dir.path() / "one", sharded = dir.path() / "sharded";
        models::save_hf_model(one, *model);
        models::save_hf_model(sharded, *model, {.max_shard_bytes = 20000});
        CHECK(fs::is_regular_file(one / "model.safetensors"));
        CHECK_FALSE(fs::exists(one / "model.safetensors.index.json"));
        const auto index = nlohmann::json::parse(std::ifstream(sharded / "model.safetensors.index.json"));
        CHECK(index["weight_map"].size() == model->weights().size());
        std::set<std::string> files;
        for (const auto& [tensor, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
        CHECK(files.size() > 1);
        for (const auto& file : files) {
            CHECK(fs::file_size(sharded / file) < 20000 + 4096);
            CHECK(file.find(fmt::format("-of-{:05d}.safetensors", files.size())) != std::string::npos);
        }
        // config.json as it was.
        CHECK(nlohmann::json::parse(std::ifstream(one / "config.json")) ==
              nlohmann::json::parse(std::ifstream(source / "config.json")));
        const models::HfWeights theirs = models::open_hf_weights(source);
        for (const fs::path& written : {one, sharded}) {
            const models::HfWeights ours = models::open_hf_weights(written);
            CHECK(ours.tensors.size() == theirs.tensors.size());
            for (const auto& [tensor, stored] : theirs.tensors) {
                CAPTURE(tensor);
                REQUIRE(ours.tensors.count(tensor));
                const data::StoredTensor& mine = *ours.tensors.at(tensor);
                CHECK(mine.dtype == stored->dtype);
                CHECK(mine.shape == stored->shape);
                CHECK(std::memcmp(mine.data, stored->data, stored->bytes) == 0);
            }
        }
        // And in another dtype on request.
        models::save_hf_model(dir.path() / "f32", *model, {.dtype = "float32"});
        const auto config = nlohmann::json::parse(std::ifstream(dir.path() / "f32" / "config.json"));
        CHECK(config["torch_dtype"] == "float32");
        CHECK(models::open_hf_weights(dir.path() / "f32").tensors.at("model.norm.weight")->dtype == "F32");
        // float16 too: written rounded, read back to the same function within what f16 keeps.
        models::save_hf_model(dir.path() / "f16", *model, {.dtype = "float16"});
        CHECK(models::open_hf_weights(dir.path() / "f16").tensors.at("model.embed_tokens.weight")->dtype == "F16");
        auto halves = models::load_hf_model(dir.path() / "f16");
        const Tensor probe = Tensor::from(std::vector<std::int32_t>{3, 1, 4, 1, 5}, {1, 5});
        autograd::InferenceMode inference;
        CHECK(relative_error(halves->logits(probe).values(), model->logits(probe).values()) < 5e-3);
    }
}

namespace {

// A copy of a reference directory, changed by `edit`.
fs::path broken_copy(const testing::TempDir& dir, const std::string& model, const std::string& as,
                     const std::function<void(const fs::path&)>& edit) {
    const fs::path out = dir.path() / as;
    fs::copy(reference_dir() / model, out);
    edit(out);
    return out;
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& change) {
    auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    change(config);
    std::ofstream(dir / "config.json") << config.dump();
}

// The reference's model.safetensors (or another of its files) with its tensors renamed or reshaped by `change`.
void rewrite_weights(const fs::path& dir, const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& change,
                     const std::string& file = "model.safetensors") {
    auto st = data::read_safetensors(dir / file);
    std::vector<std::pair<std::string, Tensor>> tensors(st.tensors.begin(), st.tensors.end());
    change(tensors);
    data::write_safetensors(dir / file, tensors);
}

}  // namespace

TEST_CASE("a broken HF directory is refused before anything is read, naming the file, the tensor and both sides") {
    testing::TempDir dir;
    struct Case {
        fs::path path;
        const char* message;
    };
    const Case cases[] = {
        {dir.path() / "nowhere", "no such directory"},
        {broken_copy(dir, "llama", "no_config", [](const fs::path& d) { fs::remove(d / "config.json"); }),
         "no config.json"},
        {broken_copy(dir, "llama", "gpt_neox",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["model_type"] = "gpt_neox"; }); }),
         "model_type \"gpt_neox\" is not supported; levers reads llama, mistral, qwen2, qwen3, smollm3, gemma2, "
         "gemma3_text, phi3, mixtral, qwen3_moe"},
        {broken_copy(dir, "gemma3_text", "chunked",
                     [](const fs::path& d) {
                         edit_config(d, [](auto& c) { c["layer_types"] = {"chunked_attention", "full_attention"}; });
                     }),
         "layer_types holds \"chunked_attention\"; levers knows \"full_attention\" and \"sliding_attention\""},
        {broken_copy(dir, "gemma3_text", "short_types",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["layer_types"] = {"full_attention"}; }); }),
         "layer_types has 1 entries for 2 layers"},
        {broken_copy(dir, "gemma2", "no_window",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["sliding_window"] = 0; }); }),
         "layer_types has sliding layers but sliding_window is 0"},
        {broken_copy(dir, "gemma2", "odd_cap",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["final_logit_softcapping"] = "tanh"; }); }),
         "\"final_logit_softcapping\" is \"tanh\", not a number"},
        {broken_copy(dir, "gemma2", "negative_cap",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["attn_logit_softcapping"] = -1.0; }); }),
         "the soft caps (3, -1) >= 0"},
        {broken_copy(dir, "gemma3_text", "relu",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["hidden_activation"] = "relu"; }); }),
         "hidden_activation \"relu\" is not supported; levers runs \"silu\" and \"gelu_pytorch_tanh\""},
        {broken_copy(dir, "smollm3", "nope_list",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["no_rope_layers"] = {1, 2}; }); }),
         "no_rope_layers holds 2; each entry is 1 (rotary) or 0 (none)"},
        {broken_copy(dir, "gemma2", "no_sandwich",
                     [](const fs::path& d) {
                         rewrite_weights(d, [](auto& t) {
                             std::erase_if(t, [](const auto& w) {
                                 return w.first == "model.layers.0.pre_feedforward_layernorm.weight";
                             });
                         });
                     }),
         "no tensor 'model.layers.0.pre_feedforward_layernorm.weight'; a gemma2 of this config.json (2 layers) needs "
         "it [32]"},
        {broken_copy(dir, "llama", "yarn",
                     [](const fs::path& d) {
                         edit_config(d, [](auto& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
                     }),
         "rope_scaling of type \"yarn\" is not supported; levers reads \"llama3\" (Llama 3.1, 3.2), \"linear\""},
        {broken_copy(dir, "phi3", "short_factors",
                     [](const fs::path& d) {
                         edit_config(d, [](auto& c) { c["rope_scaling"]["short_factor"] = {1.0, 2.0}; });
                     }),
         "rope_scaling's short_factor and long_factor have 2 and 3 entries; a head turning 6 elements needs 3 each"},
        {broken_copy(dir, "phi3", "odd_turn",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["partial_rotary_factor"] = 0.4; }); }),
         "partial_rotary_factor 0.4 must be in (0, 1] and turn an even number (>= 2) of a head's 8 elements; it "
         "turns 3"},
        {broken_copy(dir, "phi3", "no_long",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["rope_scaling"].erase("long_factor"); }); }),
         "rope_scaling: no \"long_factor\""},
        {broken_copy(dir, "phi3", "split_qkv",
                     [](const fs::path& d) {
                         rewrite_weights(d, [](auto& t) {
                             for (auto& [name, value] : t)
                                 if (name == "model.layers.0.self_attn.qkv_proj.weight")
                                     name = "model.layers.0.self_attn.q_proj.weight";
                         }, "model-00001-of-00002.safetensors");
                         auto index = nlohmann::json::parse(std::ifstream(d / "model.safetensors.index.json"));
                         auto& map = index["weight_map"];
                         map["model.layers.0.self_attn.q_proj.weight"] = map["model.layers.0.self_attn.qkv_proj.weight"];
                         map.erase("model.layers.0.self_attn.qkv_proj.weight");
                         std::ofstream(d / "model.safetensors.index.json") << index.dump();
                     }),
         "no tensor 'model.layers.0.self_attn.qkv_proj.weight'; a phi3 of this config.json (2 layers) needs it [64, 32]"},
        {broken_copy(dir, "mixtral", "top5",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["num_experts_per_tok"] = 5; }); }),
         "num_experts_per_tok = 5 of 4 experts (num_local_experts); give 1..4"},
        {broken_copy(dir, "qwen3_moe", "dense_layer_9",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["mlp_only_layers"] = {9}; }); }),
         "mlp_only_layers holds 9; the layers are 0..2"},
        {broken_copy(dir, "qwen3_moe", "lost_expert",
                     [](const fs::path& d) {
                         rewrite_weights(d, [](auto& t) {
                             std::erase_if(t, [](const auto& w) {
                                 return w.first == "model.layers.2.mlp.experts.3.up_proj.weight";
                             });
                         });
                     }),
         "model.safetensors: no tensor 'model.layers.2.mlp.experts.3.up_proj.weight'; a qwen3_moe of this config.json "
         "(3 layers) needs it [24, 32]"},
        {broken_copy(dir, "qwen3_moe", "narrow_experts",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["moe_intermediate_size"] = 16; }); }),
         "model.safetensors: tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' is [24, 32]; this config.json "
         "makes it [16, 32]"},
        {broken_copy(dir, "llama", "no_layers",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c.erase("num_hidden_layers"); }); }),
         "no \"num_hidden_layers\""},
        {broken_copy(dir, "llama", "no_weights", [](const fs::path& d) { fs::remove(d / "model.safetensors"); }),
         "no model.safetensors and no model.safetensors.index.json"},
        {broken_copy(dir, "mistral", "lost_shard",
                     [](const fs::path& d) { fs::remove(d / "model-00002-of-00003.safetensors"); }),
         "model-00002-of-00003.safetensors: no such file; model.safetensors.index.json names it"},
        {broken_copy(dir, "mistral", "cut_shard",
                     [](const fs::path& d) {
                         fs::resize_file(d / "model-00003-of-00003.safetensors",
                                         fs::file_size(d / "model-00003-of-00003.safetensors") - 100);
                     }),
         "truncated"},
        {broken_copy(dir, "llama", "wide",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["intermediate_size"] = 64; }); }),
         "tensor 'model.layers.0.mlp.gate_proj.weight' is [48, 32]; this config.json makes it [64, 32]"},
        {broken_copy(dir, "llama", "deeper",
                     [](const fs::path& d) { edit_config(d, [](auto& c) { c["num_hidden_layers"] = 3; }); }),
         "no tensor 'model.layers.2.input_layernorm.weight'; a llama of this config.json (3 layers) needs it [32]"},
        {broken_copy(dir, "llama", "renamed",
                     [](const fs::path& d) {
                         rewrite_weights(d, [](auto& t) {
                             for (auto& [name, value] : t)
                                 if (name == "model.norm.weight") name = "model.final_norm.weight";
                         });
                     }),
         "no tensor 'model.norm.weight'"},
        {broken_copy(dir, "llama", "extra",
                     [](const fs::path& d) {
                         rewrite_weights(d, [](auto& t) { t.emplace_back("model.layers.0.extra.weight", Tensor::zeros({2}, DType::f32)); });
                     }),
         "tensor 'model.layers.0.extra.weight' is not a weight of a llama of this config.json"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.path);
        std::string error;
        try {
            models::check_hf_dir(c.path);
        } catch (const Error& e) {
            error = e.message();
        }
        CHECK_MESSAGE(error.find(c.message) != std::string::npos, error);
        CHECK(error.find(c.path.filename().string()) != std::string::npos);
        if (fs::exists(c.path / "config.json") && std::string(c.message) != "truncated")  // the load says the same
            CHECK_THROWS_WITH_AS(models::load_hf_model(c.path), doctest::Contains(c.message), Error);
    }
    // A directory that is not a model's is not replaced.
    auto model = models::load_hf_model(reference_dir() / "llama");
    dir.write("notes.txt", "mine");
    CHECK_THROWS_WITH_AS(models::save_hf_model(dir.path(), *model), doctest::Contains("is not a model directory"), Error);
    CHECK(fs::exists(dir.path() / "notes.txt"));
}

TEST_CASE("PEFT adapters: written under PEFT's names, read back to the same function, merged; another base's refused") {
    testing::TempDir dir;
    auto model = models::load_hf_model(reference_dir() / "llama");
    const models::LoraSettings settings{.rank = 2, .alpha = 4, .targets = {"q_proj", "v_proj", "down_proj"}};
    CHECK(nn::attach_lora(*model, settings.rank, settings.alpha, 5, settings.targets) == 6);
    // B starts at zero (the adapter adds nothing); give it values so the test can see them.
    for (nn::Linear* l : nn::linear_layers(*model))
        if (l->has_lora()) {
            std::vector<double> v(static_cast<std::size_t>(l->lora_b()->shape().numel()));
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01 * std::sin(static_cast<double>(i) + 1);
            l->lora_b()->value().copy_from(Tensor::from(v, l->lora_b()->shape()).to(DType::f32));
        }
    model->parameters_changed();
    const Tensor tokens = Tensor::from(std::vector<std::int32_t>{3, 14, 15, 9, 26}, {1, 5});
    autograd::InferenceMode inference;
    const auto adapted = model->logits(tokens).values();
    models::save_peft_adapter(dir.path() / "adapter", *model, settings, "tests/reference/hf/llama");
    const auto config = nlohmann::json::parse(std::ifstream(dir.path() / "adapter" / "adapter_config.json"));
    CHECK(config["peft_type"] == "LORA");
    CHECK(config["r"] == 2);
    const auto names = models::open_hf_weights(reference_dir() / "llama").tensors;  // (the base's, for contrast)
    const auto file = data::SafeTensorsFile::open(dir.path() / "adapter" / "adapter_model.safetensors");
    CHECK(file.tensors().size() == 12);
    CHECK(file.tensors().count("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
    CHECK(file.tensors().at("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight").shape == Shape{32, 2});
    CHECK(names.count("model.layers.0.self_attn.q_proj.weight"));

    auto fresh = models::load_hf_model(reference_dir() / "llama");
    const auto base = fresh->logits(tokens).values();
    CHECK(models::load_peft_adapter(dir.path() / "adapter", *fresh).targets == settings.targets);
    CHECK(fresh->logits(tokens).values() == adapted);  // the same function, bit for bit
    CHECK(base != adapted);
    nn::merge_lora(*fresh);
    CHECK(relative_error(fresh->logits(tokens).values(), adapted) < 1e-6);

    // Onto another base: shapes that differ are named.
    auto qwen = models::load_hf_model(reference_dir() / "qwen3");
    CHECK_THROWS_WITH_AS(models::load_peft_adapter(dir.path() / "adapter", *qwen),
                         doctest::Contains("an adapter for another base"), Error);
    CHECK_FALSE(nn::has_lora(*qwen));  // nothing attached
    // Options levers does not read.
    auto edited = config;
    edited["use_dora"] = true;
    std::ofstream(dir.path() / "adapter" / "adapter_config.json") << edited.dump();
    CHECK_THROWS_WITH_AS(models::read_peft_settings(dir.path() / "adapter"), doctest::Contains("use_dora is true"),
                         Error);
}

TEST_CASE("PEFT adapters on Phi-3's fused projections: all-linear chooses qkv_proj and gate_up_proj as PEFT names them") {
    testing::TempDir dir;
    auto model = models::load_hf_model(reference_dir() / "phi3");
    // Llama's names name nothing here: refused, naming the layers there are.
    CHECK_THROWS_WITH_AS(nn::attach_lora(*model, 2, 4, 5, {"q_proj"}),
                         doctest::Contains("LoRA target 'q_proj' names no Linear layer of this model; its layers are "
                                           "down_proj, gate_up_proj, lm_head, o_proj, qkv_proj"),
                         Error);
    const models::LoraSettings settings{.rank = 2, .alpha = 4, .targets = {"all-linear"}};
    CHECK(nn::attach_lora(*model, settings.rank, settings.alpha, 5, settings.targets) == 8);  // 4 a layer, not lm_head
    for (nn::Linear* l : nn::linear_layers(*model)) {
        CHECK(l->has_lora() == (l->full_name() != "lm_head"));
        if (l->has_lora()) l->lora_b()->value().fill_(0.02);
    }
    model->parameters_changed();
    const Tensor tokens = Tensor::from(std::vector<std::int32_t>{3, 14, 15, 9, 26}, {1, 5});
    autograd::InferenceMode inference;
    const auto adapted = model->logits(tokens).values();
    models::save_peft_adapter(dir.path() / "adapter", *model, settings, "tests/reference/hf/phi3");
    const auto config = nlohmann::json::parse(std::ifstream(dir.path() / "adapter" / "adapter_config.json"));
    CHECK(config["target_modules"] == nlohmann::json{"down_proj", "gate_up_proj", "o_proj", "qkv_proj"});
    const auto file = data::SafeTensorsFile::open(dir.path() / "adapter" / "adapter_model.safetensors");
    CHECK(file.tensors().at("base_model.model.model.layers.0.self_attn.qkv_proj.lora_B.weight").shape == Shape{64, 2});
    CHECK(file.tensors().at("base_model.model.model.layers.1.mlp.gate_up_proj.lora_A.weight").shape == Shape{2, 32});
    auto fresh = models::load_hf_model(reference_dir() / "phi3");
    models::load_peft_adapter(dir.path() / "adapter", *fresh);
    CHECK(fresh->logits(tokens).values() == adapted);
    nn::merge_lora(*fresh);
    CHECK(relative_error(fresh->logits(tokens).values(), adapted) < 1e-6);
}

TEST_CASE("packed rows: the loss and gradients of documents packed in one row equal theirs run one by one") {
    for (const char* name : {"llama", "mistral", "qwen3", "smollm3", "gemma2", "gemma3_text", "phi3"}) {
        CAPTURE(name);
        auto packed = models::load_hf_model(reference_dir() / name, Device::cpu(), DType::f64);
        auto alone = models::load_hf_model(reference_dir() / name, Device::cpu(), DType::f64);
        // Three documents of 4, 6 and 5 tokens in one row; no target crosses a document's end.
        const std::vector<std::int64_t> lengths = {4, 6, 5};
        std::vector<std::int32_t> tokens, targets, documents;
        for (std::size_t d = 0; d < lengths.size(); ++d)
            for (std::int64_t i = 0; i < lengths[d]; ++i) {
                tokens.push_back(static_cast<std::int32_t>((d * 17 + static_cast<std::size_t>(i) * 5 + 3) % 64));
                targets.push_back(i + 1 < lengths[d] ? static_cast<std::int32_t>((d * 13 + static_cast<std::size_t>(i) * 7 + 1) % 64) : -100);
                documents.push_back(static_cast<std::int32_t>(d));
            }
        const std::int64_t t = static_cast<std::int64_t>(tokens.size());
        packed->params().zero_grad();
        const Tensor loss = packed->loss(Tensor::from(tokens, {1, t}), Tensor::from(targets, {1, t}),
                                         Tensor::from(documents, {1, t}));
        loss.backward();
        // One by one: each document's mean, weighted by its counted targets.
        alone->params().zero_grad();
        double total = 0;
        std::int64_t start = 0, counted = t - static_cast<std::int64_t>(lengths.size());
        for (const std::int64_t n : lengths) {
            const auto slice = [&](const std::vector<std::int32_t>& v) {
                return Tensor::from(std::vector<std::int32_t>(v.begin() + start, v.begin() + start + n), {1, n});
            };
            const Tensor one = alone->loss(slice(tokens), slice(targets)) * (static_cast<double>(n - 1) / static_cast<double>(counted));
            one.backward();
            total += one.item();
            start += n;
        }
        CHECK(std::abs(loss.item() - total) < 1e-12);
        CHECK(relative_error(packed->params().grads().values(), alone->params().grads().values()) < 1e-10);
    }
    auto model = models::load_hf_model(reference_dir() / "llama");
    const Tensor ids = Tensor::from(std::vector<std::int32_t>{1, 2, 3}, {1, 3});
    CHECK_THROWS_WITH_AS(model->loss(ids, ids, Tensor::from(std::vector<std::int32_t>{1, 0, 0}, {1, 3})),
                         doctest::Contains("documents must not decrease along a row"), Error);
}

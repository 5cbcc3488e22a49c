// The mixtures of experts as models (tests/reference/hf/mixtral and
// qwen3_moe; their maths against PyTorch is test_llama_family.cpp's): the
// router losses through activation checkpointing, the z-loss, the layout
// (sparse and dense layers, parameter counts), LoRA on the experts with the
// routers trained whole and saved as PEFT's modules_to_save, and the 4-bit
// base leaving the routers alone.
#include "levers/core/autograd.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "levers/nn/lora.hpp"
#include "levers/nn/quantize.hpp"
#include "tests/hf_reference.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"

#include "tests/ops/op_cases.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace levers;
using levers::testing::ids;
using levers::testing::reference;
using levers::testing::reference_dir;
using levers::testing::relative_error;
namespace fs = std::filesystem;

namespace {

// Every weight's gradient after one backward of the model's training loss.
std::vector<std::vector<double>> gradients(models::Llama& model, const Tensor& tokens, const Tensor& targets,
                                           double* loss = nullptr) {
    model.params().zero_grad();
    const Tensor l = model.loss(tokens, targets);
    l.backward();
    if (loss) *loss = l.item();
    std::vector<std::vector<double>> out;
    const ParamSet& set = model.params();
    for (const auto& [name, p] : model.weights()) out.push_back(set.grad_tensor(set.find(name)).values());
    return out;
}

}  // namespace

TEST_CASE("MoE layout: sparse and dense layers where config.json puts them, parameters counted, active ones too") {
    auto qwen = models::load_hf_model(reference_dir() / "qwen3_moe");
    const auto& c = qwen->config();
    CHECK(c.num_experts == 6);
    CHECK(c.moe_intermediate_size == 24);
    CHECK_FALSE(c.norm_topk_prob);
    CHECK(qwen->model.layers[0].moe);
    CHECK(qwen->model.layers[1].mlp);  // mlp_only_layers: [1]
    CHECK_FALSE(qwen->model.layers[1].moe);
    CHECK(qwen->model.layers[2].moe);
    std::int64_t stored = 0;
    for (const auto& [name, p] : qwen->weights()) stored += p->shape().numel();
    CHECK(c.parameter_count() == stored);
    // Each token computes with 2 of the 6 experts in the two sparse layers.
    CHECK(c.active_parameter_count() == stored - 2 * 4 * 3 * 32 * 24);
    CHECK(qwen->summary().find("6 experts (top 2) in 2 of 3 layers") != std::string::npos);

    auto mixtral = models::load_hf_model(reference_dir() / "mixtral");
    CHECK(mixtral->config().norm_topk_prob);  // Mixtral always renormalises
    CHECK(mixtral->config().moe_intermediate_size == mixtral->config().intermediate_size);
    CHECK(mixtral->model.layers[0].moe->experts[3].down_proj.full_name() == "model.layers.0.block_sparse_moe.experts.3.w2");
    CHECK(nn::is_router(mixtral->model.layers[1].moe->gate));
    CHECK_FALSE(nn::is_router(mixtral->model.layers[1].moe->experts[0].down_proj));
}

TEST_CASE("MoE router losses: the same gradients through activation checkpointing; the z-loss as defined") {
    const nlohmann::json ref = reference("mixtral");
    const Tensor tokens = ids(ref["tokens"], ref["shape"]), targets = ids(ref["targets"], ref["shape"]);
    auto model = models::load_hf_model(reference_dir() / "mixtral", Device::cpu(), DType::f64);
    model->set_router_losses({.aux = 0.02, .z = 0.3});
    double plain_loss = 0, checkpointed_loss = 0;
    const auto plain = gradients(*model, tokens, targets, &plain_loss);
    model->checkpoint_blocks(true);
    const auto checkpointed = gradients(*model, tokens, targets, &checkpointed_loss);
    CHECK(checkpointed_loss == plain_loss);
    REQUIRE(plain.size() == checkpointed.size());
    for (std::size_t i = 0; i < plain.size(); ++i) CHECK(relative_error(checkpointed[i], plain[i]) <= 1e-12);
    // The routers learn from the losses: without them their gradients differ.
    model->checkpoint_blocks(false);
    model->set_router_losses({});
    double bare_loss = 0;
    const auto bare = gradients(*model, tokens, targets, &bare_loss);
    CHECK(std::abs(bare_loss - ref["cross_entropy"].get<double>()) <= 1e-10 * bare_loss);
    std::size_t i = 0;
    for (const auto& [name, p] : model->weights()) {
        if (name == "model.layers.1.block_sparse_moe.gate.weight") CHECK(relative_error(bare[i], plain[i]) > 1e-3);
        ++i;
    }
    // z: the mean over tokens and sparse layers of logsumexp(router logits)^2, by hand.
    double sum = 0;
    std::int64_t rows = 0;
    for (models::LlamaLayer& layer : model->model.layers) {
        const std::vector<double> logits = layer.moe->router_logits().values();
        const std::int64_t experts = layer.moe->options.experts;
        for (std::size_t r = 0; r < logits.size() / static_cast<std::size_t>(experts); ++r, ++rows) {
            double top = -1e300, total = 0;
            for (std::int64_t e = 0; e < experts; ++e) top = std::max(top, logits[r * experts + e]);
            for (std::int64_t e = 0; e < experts; ++e) total += std::exp(logits[r * experts + e] - top);
            sum += std::pow(top + std::log(total), 2);
        }
    }
    CHECK(std::abs(model->z_loss().item() - sum / static_cast<double>(rows)) <= 1e-12 * sum);
    CHECK(plain_loss == doctest::Approx(bare_loss + 0.02 * ref["aux_loss"].get<double>() +
                                        0.3 * sum / static_cast<double>(rows)).epsilon(1e-12));
    // In evaluation mode the loss is the next-token loss alone.
    model->set_router_losses({.aux = 0.02, .z = 0.3});
    model->eval();
    autograd::InferenceMode inference;
    CHECK(model->loss(tokens, targets).item() == doctest::Approx(bare_loss).epsilon(1e-12));
}

TEST_CASE("LoRA on the experts: all-linear leaves the routers; they train whole and go in as modules_to_save") {
    testing::TempDir dir;
    auto model = models::load_hf_model(reference_dir() / "mixtral");
    // Mixtral's expert names; Llama's gate_proj names nothing here.
    CHECK(nn::lora_layers(*model, {"w1", "w2", "w3"}).size() == 2 * 4 * 3);
    CHECK_THROWS_WITH_AS(nn::lora_layers(*model, {"gate_proj"}),
                         doctest::Contains("LoRA target 'gate_proj' names no Linear layer of this model; its layers "
                                           "are gate, k_proj, lm_head, o_proj, q_proj, v_proj, w1, w2, w3"),
                         Error);
    const models::LoraSettings settings{.rank = 2, .alpha = 4, .targets = {"all-linear"}};
    CHECK(nn::attach_lora(*model, settings.rank, settings.alpha, 5, settings.targets) == 2 * (4 + 4 * 3));
    for (models::LlamaLayer& layer : model->model.layers) {
        CHECK_FALSE(layer.moe->gate.has_lora());
        layer.moe->gate.weight.set_trainable(true);  // train_router=true
    }
    autograd::InferenceMode inference;
    for (nn::Linear* l : nn::linear_layers(*model))
        if (l->has_lora()) l->lora_b()->value().fill_(0.01);
    const Tensor router = model->model.layers[1].moe->gate.weight.value();
    router.copy_from(router * 1.5);  // as if trained
    model->parameters_changed();
    const Tensor tokens = Tensor::from(std::vector<std::int32_t>{3, 14, 15, 9, 26, 5, 35}, {1, 7});
    const auto adapted = model->logits(tokens).values();
    models::save_peft_adapter(dir.path() / "adapter", *model, settings, "tests/reference/hf/mixtral");
    const auto config = nlohmann::json::parse(std::ifstream(dir.path() / "adapter" / "adapter_config.json"));
    CHECK(config["modules_to_save"] == nlohmann::json{"gate"});
    CHECK(config["target_modules"] == nlohmann::json{"k_proj", "o_proj", "q_proj", "v_proj", "w1", "w2", "w3"});
    const auto file = data::SafeTensorsFile::open(dir.path() / "adapter" / "adapter_model.safetensors");
    CHECK(file.tensors().at("base_model.model.model.layers.1.block_sparse_moe.gate.weight").shape == Shape{4, 32});
    CHECK(file.tensors().count("base_model.model.model.layers.0.block_sparse_moe.experts.2.w3.lora_A.weight"));

    auto fresh = models::load_hf_model(reference_dir() / "mixtral");
    const auto read = models::load_peft_adapter(dir.path() / "adapter", *fresh);
    CHECK(read.modules_to_save == std::vector<std::string>{"gate"});
    CHECK(relative_error(fresh->logits(tokens).values(), adapted) < 1e-6);
    // A whole weight modules_to_save does not name is refused.
    auto edited = config;
    edited["modules_to_save"] = nullptr;
    std::ofstream(dir.path() / "adapter" / "adapter_config.json") << edited.dump();
    auto other = models::load_hf_model(reference_dir() / "mixtral");
    CHECK_THROWS_WITH_AS(models::load_peft_adapter(dir.path() / "adapter", *other),
                         doctest::Contains("is a whole weight of 'model.layers.0.block_sparse_moe.gate', which this "
                                           "base has and modules_to_save () does not name"),
                         Error);
}

TEST_CASE("a 4-bit MoE base: the experts' projections in 4 bits, the routers as they were") {
    auto model = models::load_hf_model(reference_dir() / "qwen3_moe");
    nn::hold_linears_in_4bit(*model, {});
    CHECK(model->model.layers[0].moe->experts[5].up_proj->weight.held_in_4bit());
    CHECK_FALSE(model->model.layers[0].moe->gate.weight.held_in_4bit());
    const Tensor tokens = Tensor::from(std::vector<std::int32_t>{3, 14, 15, 9}, {1, 4});
    autograd::InferenceMode inference;
    CHECK(model->logits(tokens).shape() == Shape{1, 4, 64});
}

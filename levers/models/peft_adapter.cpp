#include "levers/models/peft_adapter.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/files.hpp"
#include "levers/data/safetensors.hpp"
#include "levers/nn/lora.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>

namespace levers::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfig = "adapter_config.json";
constexpr const char* kWeights = "adapter_model.safetensors";
constexpr const char* kPrefix = "base_model.model.";

bool is_adapter_dir(const fs::path& dir) { return fs::is_regular_file(dir / kConfig); }

}  // namespace

LoraSettings read_peft_settings(const fs::path& dir) {
    const fs::path file = dir / kConfig;
    LEVERS_CHECK(fs::is_directory(dir), "{}: no such directory; give a PEFT adapter directory ({} and {})",
                 dir.string(), kConfig, kWeights);
    const auto j = nlohmann::json::parse(read_file(file, "a PEFT adapter directory has one"), nullptr, false);
    LEVERS_CHECK(j.is_object(), "{}: not a JSON object", file.string());
    LEVERS_CHECK(j.value("peft_type", "") == "LORA", "{}: peft_type {} is not supported; levers reads LORA",
                 file.string(), j.value("peft_type", nlohmann::json()).dump());
    for (const char* flag : {"use_rslora", "use_dora"})
        LEVERS_CHECK(!j.value(flag, false), "{}: {} is true; levers reads plain LoRA adapters", file.string(), flag);
    LEVERS_CHECK(j.value("bias", "none") == "none", "{}: bias \"{}\" is not supported; levers reads adapters with "
                 "bias \"none\"", file.string(), j.value("bias", ""));
    LEVERS_CHECK(!j.value("fan_in_fan_out", false), "{}: fan_in_fan_out adapters (GPT-2's Conv1D) are not supported",
                 file.string());
    LEVERS_CHECK(j.contains("target_modules") && j.at("target_modules").is_array(),
                 "{}: target_modules must be a list of layer names (a regex is not supported)", file.string());
    LoraSettings s;
    try {
        s.rank = j.at("r").get<int>();
        s.alpha = j.at("lora_alpha").get<double>();
        s.targets = j.at("target_modules").get<std::vector<std::string>>();
        if (j.contains("modules_to_save") && !j.at("modules_to_save").is_null())
            s.modules_to_save = j.at("modules_to_save").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: r, lora_alpha and target_modules are needed: {}", file.string(), e.what());
    }
    LEVERS_CHECK(s.rank >= 1 && s.alpha > 0 && !s.targets.empty(), "{}: r {} and lora_alpha {} must be positive, "
                 "target_modules not empty", file.string(), s.rank, s.alpha);
    return s;
}

void save_peft_adapter(const fs::path& dir, nn::Module& model, const LoraSettings& settings, const std::string& base) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::set<std::string> saved_whole;
    for (nn::Linear* l : nn::linear_layers(model))
        if (!l->has_lora() && l->weight.trainable()) {  // PEFT's modules_to_save
            tensors.emplace_back(kPrefix + l->full_name() + ".weight",
                                 l->weight.value().to(Device::cpu(), DType::f32).contiguous());
            saved_whole.insert(l->name());
        }
    for (nn::Linear* l : nn::linear_layers(model))
        if (l->has_lora()) {
            tensors.emplace_back(kPrefix + l->full_name() + ".lora_A.weight",
                                 l->lora_a()->value().to(Device::cpu(), DType::f32).contiguous());
            tensors.emplace_back(kPrefix + l->full_name() + ".lora_B.weight",
                                 l->lora_b()->value().to(Device::cpu(), DType::f32).contiguous());
        }
    LEVERS_CHECK(tensors.size() > saved_whole.size(), "save_peft_adapter: the model has no LoRA adapters");
    const nlohmann::json config = {{"peft_type", "LORA"},
                                   {"task_type", "CAUSAL_LM"},
                                   {"base_model_name_or_path", base},
                                   {"r", settings.rank},
                                   {"lora_alpha", settings.alpha},
                                   {"lora_dropout", 0.0},
                                   {"target_modules", nn::resolved_targets(model, settings.targets)},
                                   {"bias", "none"},
                                   {"fan_in_fan_out", false},
                                   {"use_rslora", false},
                                   {"use_dora", false},
                                   {"inference_mode", true},
                                   {"modules_to_save", saved_whole.empty() ? nlohmann::json(nullptr)
                                                                           : nlohmann::json(saved_whole)}};
    data::write_directory(dir, "an adapter directory", is_adapter_dir, [&](const fs::path& partial) {
        data::write_safetensors(partial / kWeights, tensors, {{"format", "pt"}});
        std::ofstream(partial / kConfig) << config.dump(2) << "\n";
    });
}

LoraSettings load_peft_adapter(const fs::path& dir, nn::Module& model) {
    const LoraSettings s = read_peft_settings(dir);
    const fs::path file = dir / kWeights;
    LEVERS_CHECK(fs::is_regular_file(file), "{}: no such file; a PEFT adapter directory has one beside {}",
                 file.string(), kConfig);
    const data::SafeTensorsFile weights = data::SafeTensorsFile::open(file);
    // Every tensor checked against the base before anything changes.
    std::map<std::string, nn::Linear*> layers;
    for (nn::Linear* l : nn::linear_layers(model)) layers[l->full_name()] = l;
    std::map<std::string, int> seen;  // layer -> A and B found
    std::map<std::string, nn::Linear*> whole;  // modules_to_save's tensor -> its layer
    for (const auto& [name, stored] : weights.tensors()) {
        const bool a = name.ends_with(".lora_A.weight"), b = name.ends_with(".lora_B.weight");
        if (!a && !b && name.starts_with(kPrefix) && name.ends_with(".weight")) {
            const std::string layer = name.substr(std::string(kPrefix).size(),
                                                  name.size() - std::string(kPrefix).size() - std::string(".weight").size());
            const auto it = layers.find(layer);
            LEVERS_CHECK(it != layers.end() && std::count(s.modules_to_save.begin(), s.modules_to_save.end(),
                                                          it->second->name()),
                         "{}: tensor '{}' is a whole weight of '{}', which this base {} and modules_to_save ({}) does "
                         "not name", file.string(), name, layer, it == layers.end() ? "does not have" : "has",
                         fmt::join(s.modules_to_save, ", "));
            LEVERS_CHECK(stored.shape == it->second->weight.shape(), "{}: tensor '{}' is {}; this base's is {}",
                         file.string(), name, stored.shape.str(), it->second->weight.shape().str());
            whole[name] = it->second;
            continue;
        }
        LEVERS_CHECK(name.starts_with(kPrefix) && (a || b), "{}: tensor '{}' is not a LoRA weight as PEFT names them "
                     "(base_model.model.<layer>.lora_A.weight or .lora_B.weight)", file.string(), name);
        const std::string layer = name.substr(std::string(kPrefix).size(),
                                              name.size() - std::string(kPrefix).size() - std::string(".lora_A.weight").size());
        const auto it = layers.find(layer);
        LEVERS_CHECK(it != layers.end(), "{}: tensor '{}' adapts layer '{}', which this base does not have: an adapter "
                     "for another base", file.string(), name, layer);
        const Shape want = a ? Shape{s.rank, it->second->in_features()} : Shape{it->second->out_features(), s.rank};
        LEVERS_CHECK(stored.shape == want, "{}: tensor '{}' is {}; this base's '{}' ({} -> {}) at rank {} needs {}: an "
                     "adapter for another base", file.string(), name, stored.shape.str(), layer,
                     it->second->in_features(), it->second->out_features(), s.rank, want.str());
        seen[layer] += a ? 1 : 2;
    }
    for (const auto& [layer, got] : seen)
        LEVERS_CHECK(got == 3, "{}: layer '{}' has only its {}", file.string(), layer, got == 1 ? "lora_A" : "lora_B");
    LEVERS_CHECK(!seen.empty(), "{}: holds no LoRA weights", file.string());
    std::vector<std::string> adapted;
    for (const auto& [layer, got] : seen) adapted.push_back(layer);
    nn::attach_lora(model, s.rank, s.alpha, 0, adapted);
    // A stored tensor into a parameter, in the parameter's dtype.
    const auto set = [&](nn::Parameter& param, const std::string& name) {
        const Tensor host = weights.tensors().at(name).to_f32();
        param.value().copy_from(host.dtype() == param.value().dtype() ? host : host.to(param.value().dtype()));
    };
    for (const auto& [name, layer] : whole) set(layer->weight, name);
    for (const auto& [layer, got] : seen) {
        nn::Linear& l = *layers.at(layer);
        set(*l.lora_a(), kPrefix + layer + ".lora_A.weight");
        set(*l.lora_b(), kPrefix + layer + ".lora_B.weight");
    }
    model.parameters_changed();
    return s;
}

}  // namespace levers::models

#include "levers/models/gpt_io.hpp"

#include "levers/core/checkpoint.hpp"

#include <algorithm>

namespace levers::models {

void save_gpt(const std::filesystem::path& path, Gpt& model, const nlohmann::json& extra) {
    const GptConfig& c = model.config();
    nlohmann::json meta = extra;
    meta["model"] = "gpt";
    meta["config"] = {{"vocab_size", c.vocab_size}, {"block_size", c.block_size}, {"n_layer", c.n_layer},
                      {"n_head", c.n_head}, {"n_embd", c.n_embd}};
    std::vector<NamedTensor> tensors;
    // f32 (or f64) as levers' GPTs hold their weights; a frozen base held in bf16 on a GPU is widened.
    for (const auto& [name, p] : model.weights()) {
        const Tensor value = p->value();
        tensors.push_back({name, value.dtype() == DType::bf16 ? value.to(Device::cpu(), DType::f32) : value});
    }
    write_checkpoint(path, meta, tensors);
}

std::unique_ptr<Gpt> load_gpt(const std::filesystem::path& path) {
    const Checkpoint ck = read_checkpoint(path);
    const std::string file = path.string();
    LEVERS_CHECK(ck.metadata.value("model", "") == "gpt", "{}: holds a '{}' model, expected a GPT", file,
                 ck.metadata.value("model", "unknown"));
    GptConfig config;
    try {
        const auto& c = ck.metadata.at("config");
        config = {c.at("vocab_size"), c.at("block_size"), c.at("n_layer"), c.at("n_head"), c.at("n_embd")};
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: the GPT config in the metadata is incomplete: {}", file, e.what());
    }
    auto model = std::make_unique<Gpt>(config, 0);
    for (const auto& [name, p] : model->weights()) {
        const Tensor& dst = p->value();
        // Files written before the model was made of modules name the embeddings "wte" and "wpe".
        const bool old_name = (name == "wte.weight" || name == "wpe.weight") &&
                              std::none_of(ck.tensors.begin(), ck.tensors.end(),
                                           [&](const NamedTensor& t) { return t.name == name; });
        const std::string stored = old_name ? name.substr(0, 3) : name;
        const Tensor& src = ck.at(stored);
        LEVERS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(),
                     "{}: tensor '{}' is {} {}, this GPT needs f32 {}", file, stored, name_of(src.dtype()),
                     src.shape().str(), dst.shape().str());
        dst.copy_from(src);
    }
    model->parameters_changed();
    return model;
}

}  // namespace levers::models

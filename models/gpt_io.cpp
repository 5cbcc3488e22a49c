#include "models/gpt_io.hpp"

#include "framework/core/checkpoint.hpp"

namespace levers::models {

void save_gpt(const std::filesystem::path& path, const Gpt<float>& model, const nlohmann::json& extra) {
    const GptConfig& c = model.config();
    nlohmann::json meta = extra;
    meta["model"] = "gpt";
    meta["config"] = {{"vocab_size", c.vocab_size}, {"block_size", c.block_size}, {"n_layer", c.n_layer},
                      {"n_head", c.n_head}, {"n_embd", c.n_embd}};
    std::vector<NamedTensor> tensors;
    for (std::size_t i = 0; i < model.params().entries().size(); ++i)
        tensors.push_back({model.params().entries()[i].name, model.params().param_tensor(static_cast<int>(i))});
    write_checkpoint(path, meta, tensors);
}

std::unique_ptr<Gpt<float>> load_gpt(const std::filesystem::path& path) {
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
    auto model = std::make_unique<Gpt<float>>(config, 0);
    for (std::size_t i = 0; i < model->params().entries().size(); ++i) {
        Tensor dst = model->params().param_tensor(static_cast<int>(i));
        const auto& name = model->params().entries()[i].name;
        const Tensor& src = ck.at(name);
        LEVERS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(),
                     "{}: tensor '{}' is {} {}, this GPT needs f32 {}", file, name, name_of(src.dtype()),
                     src.shape().str(), dst.shape().str());
        dst.copy_from(src);
    }
    return model;
}

}  // namespace levers::models

#include "levers/models/gpt2_weights.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <set>

namespace levers::models {

namespace fs = std::filesystem;

namespace {

// Hugging Face's name for a levers GPT parameter.
std::string hf_name(const std::string& ours) { return "transformer." + ours; }

bool is_conv1d(const std::string& name) {
    for (const char* suffix : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
        if (name.ends_with(suffix)) return true;
    return false;
}

Tensor transposed(const Tensor& t) {
    const std::int64_t rows = t.shape()[0], cols = t.shape()[1];
    Tensor out = Tensor::zeros({cols, rows}, DType::f32);
    const float* src = t.data<float>();
    float* dst = out.data<float>();
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
    return out;
}

int head_count(const fs::path& path, const data::SafeTensors& st, int given) {
    if (given > 0) return given;
    if (auto it = st.metadata.find("n_head"); it != st.metadata.end()) return std::stoi(it->second);
    const fs::path config = path.parent_path() / "config.json";
    if (fs::exists(config)) {
        const auto j = nlohmann::json::parse(read_file(config), nullptr, false);
        if (j.is_object() && j.contains("n_head") && j["n_head"].is_number_integer()) return j["n_head"].get<int>();
    }
    LEVERS_FAIL("{}: the weights do not say how many attention heads the model has; put Hugging Face's config.json "
                "beside them or give n_head (12 for GPT-2 small)", path.string());
}

}  // namespace

std::unique_ptr<Gpt> load_gpt2_safetensors(const fs::path& path, int n_head) {
    const std::string file = path.string();
    data::SafeTensors st = data::read_safetensors(path);
    // One naming: with the "transformer." prefix.
    std::map<std::string, Tensor> weights;
    for (auto& [name, t] : st.tensors) {
        if (name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")) continue;
        weights[name.starts_with("transformer.") ? name : "transformer." + name] = std::move(t);
    }
    auto find = [&](const std::string& name) -> const Tensor& {
        auto it = weights.find(name);
        LEVERS_CHECK(it != weights.end(), "{}: no tensor '{}': not GPT-2 weights in Hugging Face's layout", file, name);
        return it->second;
    };
    const Tensor& wte = find("transformer.wte.weight");
    const Tensor& wpe = find("transformer.wpe.weight");
    LEVERS_CHECK(wte.shape().ndim() == 2 && wpe.shape().ndim() == 2 && wte.shape()[1] == wpe.shape()[1],
                 "{}: wte {} and wpe {} do not describe one model width", file, wte.shape().str(), wpe.shape().str());
    int layers = 0;
    while (weights.count("transformer.h." + std::to_string(layers) + ".ln_1.weight")) ++layers;
    GptConfig config{.vocab_size = static_cast<int>(wte.shape()[0]),
                     .block_size = static_cast<int>(wpe.shape()[0]),
                     .n_layer = layers,
                     .n_head = head_count(path, st, n_head),
                     .n_embd = static_cast<int>(wte.shape()[1])};
    auto model = std::make_unique<Gpt>(config, 0);

    std::set<std::string> used;
    for (const auto& [ours, p] : model->weights()) {
        const std::string theirs = hf_name(ours);
        const Tensor& src = find(theirs);
        used.insert(theirs);
        const Tensor value = is_conv1d(theirs) && src.shape().ndim() == 2 ? transposed(src) : src;
        const Tensor& dst = p->value();
        LEVERS_CHECK(value.shape() == dst.shape(), "{}: '{}' is {}, a GPT of this shape needs {}", file, theirs,
                     src.shape().str(), is_conv1d(theirs) ? transposed(dst).shape().str() : dst.shape().str());
        dst.copy_from(value);
    }
    model->parameters_changed();
    for (const auto& [name, t] : weights)
        LEVERS_CHECK(used.count(name), "{}: tensor '{}' has no place in a GPT-2 model", file, name);
    return model;
}

void save_gpt2_safetensors(const fs::path& path, Gpt& model) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [ours, p] : model.weights()) {
        const std::string name = hf_name(ours);
        const Tensor t = p->value().to(Device::cpu(), DType::f32);  // GPT-2's files are f32
        tensors.emplace_back(name, is_conv1d(name) ? transposed(t) : t);
    }
    const GptConfig& c = model.config();
    data::write_safetensors(path, tensors,
                            {{"format", "pt"},
                             {"producer", "levers"},
                             {"n_head", std::to_string(c.n_head)},
                             {"n_layer", std::to_string(c.n_layer)},
                             {"n_embd", std::to_string(c.n_embd)}});
}

}  // namespace levers::models

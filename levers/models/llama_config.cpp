#include "levers/models/llama_config.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"

#include <array>
#include <string_view>

namespace levers::models {

namespace {

constexpr std::array<std::string_view, 4> kTypes = {"llama", "mistral", "qwen2", "qwen3"};

std::string architecture(const std::string& type) {
    if (type == "llama") return "LlamaForCausalLM";
    if (type == "mistral") return "MistralForCausalLM";
    if (type == "qwen2") return "Qwen2ForCausalLM";
    return "Qwen3ForCausalLM";
}

// A field read with its name in the error: required unless a fallback is given.
template <class T> T field(const nlohmann::json& j, const char* key, const std::string& source) {
    LEVERS_CHECK(j.contains(key) && !j.at(key).is_null(), "{}: no \"{}\"; a config.json of a {} model has one", source,
                 key, supported_model_types());
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
        LEVERS_FAIL("{}: \"{}\" is {}, not a {}", source, key, j.at(key).dump(),
                    std::is_same_v<T, bool> ? "boolean" : std::is_integral_v<T> ? "whole number" : "number");
    }
}
template <class T> T field(const nlohmann::json& j, const char* key, const std::string& source, T fallback) {
    return j.contains(key) && !j.at(key).is_null() ? field<T>(j, key, source) : fallback;
}

std::optional<nn::Llama3RopeScaling> rope_scaling(const nlohmann::json& j, const std::string& source) {
    if (!j.contains("rope_scaling") || j.at("rope_scaling").is_null()) return std::nullopt;
    const nlohmann::json& s = j.at("rope_scaling");
    LEVERS_CHECK(s.is_object(), "{}: \"rope_scaling\" is {}, expected an object or null", source, s.dump());
    const std::string type = s.contains("rope_type") ? s.at("rope_type").get<std::string>()
                             : s.contains("type")    ? s.at("type").get<std::string>()
                                                     : "";
    if (type == "default") return std::nullopt;
    LEVERS_CHECK(type == "llama3", "{}: rope_scaling of type \"{}\" is not supported; levers reads \"llama3\" "
                 "(Llama 3.1, 3.2) and \"default\" (or none)", source, type);
    const std::string where = source + ": rope_scaling";
    nn::Llama3RopeScaling r{.factor = field<double>(s, "factor", where),
                        .low_freq_factor = field<double>(s, "low_freq_factor", where),
                        .high_freq_factor = field<double>(s, "high_freq_factor", where),
                        .original_max_position_embeddings =
                            field<std::int64_t>(s, "original_max_position_embeddings", where)};
    LEVERS_CHECK(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor &&
                     r.original_max_position_embeddings > 0,
                 "{}: factor {} and low/high frequency factors {}/{} must be positive, high above low, over {} "
                 "positions", where, r.factor, r.low_freq_factor, r.high_freq_factor,
                 r.original_max_position_embeddings);
    return r;
}

std::vector<std::int64_t> token_ids(const nlohmann::json& j, const char* key) {
    if (!j.contains(key) || j.at(key).is_null()) return {};
    if (j.at(key).is_array()) return j.at(key).get<std::vector<std::int64_t>>();
    return {j.at(key).get<std::int64_t>()};
}

}  // namespace

const char* supported_model_types() { return "llama, mistral, qwen2, qwen3"; }

LlamaConfig parse_llama_config(const nlohmann::json& j, const std::string& source) {
    LEVERS_CHECK(j.is_object(), "{}: not a JSON object", source);
    LlamaConfig c;
    c.model_type = field<std::string>(j, "model_type", source);
    bool known = false;
    for (auto t : kTypes) known |= t == c.model_type;
    LEVERS_CHECK(known, "{}: model_type \"{}\" is not supported; levers reads {}", source, c.model_type,
                 supported_model_types());
    const std::string act = field<std::string>(j, "hidden_act", source, std::string("silu"));
    LEVERS_CHECK(act == "silu", "{}: hidden_act \"{}\" is not supported; the Llama family's is \"silu\"", source, act);
    c.vocab_size = field<std::int64_t>(j, "vocab_size", source);
    c.hidden_size = field<std::int64_t>(j, "hidden_size", source);
    c.intermediate_size = field<std::int64_t>(j, "intermediate_size", source);
    c.num_hidden_layers = field<std::int64_t>(j, "num_hidden_layers", source);
    c.num_attention_heads = field<std::int64_t>(j, "num_attention_heads", source);
    c.num_key_value_heads = field<std::int64_t>(j, "num_key_value_heads", source, c.num_attention_heads);
    c.head_dim = field<std::int64_t>(j, "head_dim", source, std::int64_t{0});
    c.max_position_embeddings = field<std::int64_t>(j, "max_position_embeddings", source, std::int64_t{2048});
    c.rms_norm_eps = field<double>(j, "rms_norm_eps", source, 1e-6);
    c.rope_theta = field<double>(j, "rope_theta", source, 10000.0);
    c.initializer_range = field<double>(j, "initializer_range", source, 0.02);
    c.rope_scaling = rope_scaling(j, source);
    c.attention_bias = c.model_type == "qwen2" || field<bool>(j, "attention_bias", source, false);
    c.mlp_bias = field<bool>(j, "mlp_bias", source, false);
    c.qk_norm = c.model_type == "qwen3";
    if (c.model_type == "mistral") c.sliding_window = field<std::int64_t>(j, "sliding_window", source, std::int64_t{0});
    LEVERS_CHECK(!field<bool>(j, "use_sliding_window", source, false), "{}: use_sliding_window is true; levers "
                 "runs {} with full attention only", source, c.model_type);
    c.tie_word_embeddings = field<bool>(j, "tie_word_embeddings", source, false);
    c.eos_token_ids = token_ids(j, "eos_token_id");
    const auto bos = token_ids(j, "bos_token_id");
    c.bos_token_id = bos.empty() ? -1 : bos.front();
    c.torch_dtype = field<std::string>(j, "torch_dtype", source, std::string("float32"));
    LEVERS_CHECK(c.torch_dtype == "float32" || c.torch_dtype == "bfloat16" || c.torch_dtype == "float16",
                 "{}: torch_dtype \"{}\" is not supported; levers reads float32, bfloat16 and float16", source,
                 c.torch_dtype);
    c.original = j;
    try {
        c.validate();
    } catch (const Error& e) {
        LEVERS_FAIL("{}: {}", source, e.message());
    }
    return c;
}

LlamaConfig read_llama_config(const std::filesystem::path& config_json) {
    const std::string text = read_file(config_json, "a Hugging Face model directory has a config.json");
    const auto j = nlohmann::json::parse(text, nullptr, false);
    LEVERS_CHECK(!j.is_discarded(), "{}: not valid JSON", config_json.string());
    return parse_llama_config(j, config_json.string());
}

void LlamaConfig::validate() const {
    for (auto [name, v] : {std::pair{"vocab_size", vocab_size}, {"hidden_size", hidden_size},
                           {"intermediate_size", intermediate_size}, {"num_hidden_layers", num_hidden_layers},
                           {"num_attention_heads", num_attention_heads}, {"num_key_value_heads", num_key_value_heads},
                           {"max_position_embeddings", max_position_embeddings}})
        LEVERS_CHECK(v >= 1, "{} must be >= 1, got {}", name, v);
    LEVERS_CHECK(head_dim > 0 || hidden_size % num_attention_heads == 0,
                 "hidden_size {} does not split into {} heads; give head_dim", hidden_size, num_attention_heads);
    LEVERS_CHECK(head_size() % 2 == 0, "the head size must be even for rotary embeddings, got {}", head_size());
    LEVERS_CHECK(num_attention_heads % num_key_value_heads == 0,
                 "num_attention_heads {} is not a multiple of num_key_value_heads {}", num_attention_heads,
                 num_key_value_heads);
    LEVERS_CHECK(rms_norm_eps > 0 && rope_theta > 0, "rms_norm_eps ({}) and rope_theta ({}) must be positive",
                 rms_norm_eps, rope_theta);
    LEVERS_CHECK(sliding_window >= 0, "sliding_window must be >= 0, got {}", sliding_window);
}

std::int64_t LlamaConfig::parameter_count() const {
    const std::int64_t d = hidden_size, hd = head_size(), q = num_attention_heads * hd, kv = num_key_value_heads * hd;
    const std::int64_t attention = d * q + 2 * d * kv + q * d + (attention_bias ? q + 2 * kv : 0) + (qk_norm ? 2 * hd : 0);
    const std::int64_t mlp = 3 * d * intermediate_size + (mlp_bias ? 2 * intermediate_size + d : 0);
    const std::int64_t layer = attention + mlp + 2 * d;
    return vocab_size * d * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * layer + d;
}

nlohmann::json LlamaConfig::to_json() const {
    nlohmann::json j = original;
    if (j.is_null()) {
        j = {{"architectures", {architecture(model_type)}}, {"model_type", model_type}, {"vocab_size", vocab_size},
             {"hidden_size", hidden_size}, {"intermediate_size", intermediate_size},
             {"num_hidden_layers", num_hidden_layers}, {"num_attention_heads", num_attention_heads},
             {"num_key_value_heads", num_key_value_heads}, {"max_position_embeddings", max_position_embeddings},
             {"rms_norm_eps", rms_norm_eps}, {"rope_theta", rope_theta}, {"hidden_act", "silu"},
             {"initializer_range", initializer_range}, {"tie_word_embeddings", tie_word_embeddings}};
        if (head_dim > 0) j["head_dim"] = head_dim;
        if (model_type != "qwen2") j["attention_bias"] = attention_bias;
        if (model_type == "llama") j["mlp_bias"] = mlp_bias;
        if (model_type == "mistral") j["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nullptr;
        if (rope_scaling)
            j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", rope_scaling->factor},
                                 {"low_freq_factor", rope_scaling->low_freq_factor},
                                 {"high_freq_factor", rope_scaling->high_freq_factor},
                                 {"original_max_position_embeddings", rope_scaling->original_max_position_embeddings}};
        if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
        if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids.front();
        if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
    }
    j["torch_dtype"] = torch_dtype;
    return j;
}

}  // namespace levers::models

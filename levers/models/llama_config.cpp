#include "levers/models/llama_config.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"

#include <array>
#include <cmath>
#include <string_view>

namespace levers::models {

namespace {

// Each model type and transformers' class of it.
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kTypes = {{
    {"llama", "LlamaForCausalLM"},
    {"mistral", "MistralForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "Qwen3ForCausalLM"},
    {"smollm3", "SmolLM3ForCausalLM"},
    {"gemma2", "Gemma2ForCausalLM"},
    {"gemma3_text", "Gemma3ForCausalLM"},
    {"phi3", "Phi3ForCausalLM"},
    {"mixtral", "MixtralForCausalLM"},
    {"qwen3_moe", "Qwen3MoeForCausalLM"},
}};

std::string architecture(const std::string& type) {
    for (auto [t, a] : kTypes)
        if (t == type) return std::string(a);
    return "LlamaForCausalLM";
}

bool is_gemma(const std::string& type) { return type == "gemma2" || type == "gemma3_text"; }

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

// Phi-3's: the original length is config.json's own key (or rope_scaling's),
// the factor max_position_embeddings over it where rope_scaling gives none,
// and cos and sin scaled by sqrt(1 + ln(factor) / ln(original)) where it
// gives no attention_factor, as transformers' _compute_longrope_parameters.
nn::RopeScaling longrope(const nlohmann::json& j, const nlohmann::json& s, const std::string& source) {
    const std::string where = source + ": rope_scaling";
    nn::RopeScaling r{.kind = nn::RopeScaling::Kind::longrope};
    r.short_factor = field<std::vector<double>>(s, "short_factor", where);
    r.long_factor = field<std::vector<double>>(s, "long_factor", where);
    const auto longest = field<std::int64_t>(j, "max_position_embeddings", source, std::int64_t{2048});
    const auto top = field<std::int64_t>(j, "original_max_position_embeddings", source, longest);
    r.original_max_position_embeddings = field<std::int64_t>(s, "original_max_position_embeddings", where, top);
    LEVERS_CHECK(r.original_max_position_embeddings > 0, "{}: original_max_position_embeddings must be positive, got "
                 "{}", where, r.original_max_position_embeddings);
    r.factor = field<double>(s, "factor", where,
                             static_cast<double>(longest) / static_cast<double>(r.original_max_position_embeddings));
    LEVERS_CHECK(r.factor > 0, "{}: factor {} must be positive", where, r.factor);
    const double by_factor = r.factor <= 1 ? 1.0
                                           : std::sqrt(1 + std::log(r.factor) /
                                                               std::log(static_cast<double>(r.original_max_position_embeddings)));
    r.attention_factor = field<double>(s, "attention_factor", where, by_factor);
    LEVERS_CHECK(r.attention_factor > 0, "{}: attention_factor {} must be positive", where, r.attention_factor);
    return r;
}

std::optional<nn::RopeScaling> rope_scaling(const nlohmann::json& j, const std::string& source) {
    if (!j.contains("rope_scaling") || j.at("rope_scaling").is_null()) return std::nullopt;
    const nlohmann::json& s = j.at("rope_scaling");
    LEVERS_CHECK(s.is_object(), "{}: \"rope_scaling\" is {}, expected an object or null", source, s.dump());
    const std::string type = s.contains("rope_type") ? s.at("rope_type").get<std::string>()
                             : s.contains("type")    ? s.at("type").get<std::string>()
                                                     : "";
    if (type == "default") return std::nullopt;
    LEVERS_CHECK(type == "llama3" || type == "linear" || type == "longrope" || type == "su",
                 "{}: rope_scaling of type \"{}\" is not supported; levers reads \"llama3\" (Llama 3.1, 3.2), "
                 "\"linear\" (Gemma 3), \"longrope\" (Phi-3, Phi-4-mini; \"su\" its old name) and \"default\" "
                 "(or none)", source, type);
    const std::string where = source + ": rope_scaling";
    if (type == "longrope" || type == "su") return longrope(j, s, source);
    if (type == "linear") {
        const double factor = field<double>(s, "factor", where);
        LEVERS_CHECK(factor > 0, "{}: factor {} must be positive", where, factor);
        return nn::RopeScaling{.kind = nn::RopeScaling::Kind::linear, .factor = factor};
    }
    nn::RopeScaling r{.factor = field<double>(s, "factor", where),
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

// Which layers slide and which rotate, as transformers fills them in where config.json leaves them out.
void per_layer(LlamaConfig& c, const nlohmann::json& j, const std::string& source) {
    const auto n = static_cast<std::size_t>(c.num_hidden_layers);
    if (c.model_type == "smollm3") {
        if (j.contains("no_rope_layers") && !j.at("no_rope_layers").is_null()) {
            c.no_rope_layers = field<std::vector<int>>(j, "no_rope_layers", source);
            LEVERS_CHECK(c.no_rope_layers.size() >= n, "{}: no_rope_layers has {} entries for {} layers", source,
                         c.no_rope_layers.size(), n);
            c.no_rope_layers.resize(n);
            for (int v : c.no_rope_layers)
                LEVERS_CHECK(v == 0 || v == 1, "{}: no_rope_layers holds {}; each entry is 1 (rotary) or 0 (none)",
                             source, v);
        } else {
            const auto every = field<std::int64_t>(j, "no_rope_layer_interval", source, std::int64_t{4});
            LEVERS_CHECK(every >= 1, "{}: no_rope_layer_interval must be >= 1, got {}", source, every);
            for (std::size_t i = 0; i < n; ++i) c.no_rope_layers.push_back((i + 1) % every != 0 ? 1 : 0);
        }
    }
    if (j.contains("layer_types") && !j.at("layer_types").is_null()) {
        c.layer_types = field<std::vector<std::string>>(j, "layer_types", source);
        LEVERS_CHECK(c.layer_types.size() == n, "{}: layer_types has {} entries for {} layers", source,
                     c.layer_types.size(), n);
        for (const std::string& t : c.layer_types)
            LEVERS_CHECK(t == "full_attention" || t == "sliding_attention", "{}: layer_types holds \"{}\"; levers "
                         "knows \"full_attention\" and \"sliding_attention\"", source, t);
    } else if (is_gemma(c.model_type)) {
        // gemma2 alternates from a sliding first layer; gemma3_text slides but for every pattern-th.
        const auto pattern = c.model_type == "gemma2"
                                 ? std::int64_t{2}
                                 : field<std::int64_t>(j, "sliding_window_pattern", source, std::int64_t{6});
        LEVERS_CHECK(pattern >= 1, "{}: sliding_window_pattern must be >= 1, got {}", source, pattern);
        for (std::size_t i = 0; i < n; ++i)
            c.layer_types.emplace_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
    } else if (c.model_type == "smollm3") {
        const bool slides = field<bool>(j, "use_sliding_window", source, false) && c.sliding_window > 0;
        for (std::size_t i = 0; i < n; ++i)
            c.layer_types.emplace_back(slides && c.no_rope_layers[i] == 0 ? "sliding_attention" : "full_attention");
    }
    bool slides = false;
    for (const std::string& t : c.layer_types) slides |= t == "sliding_attention";
    LEVERS_CHECK(!slides || c.sliding_window > 0, "{}: layer_types has sliding layers but sliding_window is {}",
                 source, c.sliding_window);
}

// The experts of mixtral and qwen3_moe, with transformers' defaults.
void experts(LlamaConfig& c, const nlohmann::json& j, const std::string& source) {
    const bool mixtral = c.model_type == "mixtral";
    c.num_experts = field<std::int64_t>(j, mixtral ? "num_local_experts" : "num_experts", source,
                                        std::int64_t{mixtral ? 8 : 128});
    c.num_experts_per_tok = field<std::int64_t>(j, "num_experts_per_tok", source, std::int64_t{mixtral ? 2 : 8});
    c.moe_intermediate_size =
        mixtral ? c.intermediate_size : field<std::int64_t>(j, "moe_intermediate_size", source, std::int64_t{768});
    c.norm_topk_prob = mixtral || field<bool>(j, "norm_topk_prob", source, false);
    if (!mixtral) {
        c.decoder_sparse_step = field<std::int64_t>(j, "decoder_sparse_step", source, std::int64_t{1});
        c.mlp_only_layers = field<std::vector<std::int64_t>>(j, "mlp_only_layers", source, {});
    }
    c.router_aux_loss_coef = field<double>(j, "router_aux_loss_coef", source, 0.001);
    c.output_router_logits = field<bool>(j, "output_router_logits", source, false);
}

}  // namespace

const char* supported_model_types() {
    return "llama, mistral, qwen2, qwen3, smollm3, gemma2, gemma3_text, phi3, mixtral, qwen3_moe";
}

bool LlamaConfig::sparse_layer(std::int64_t index) const {
    if (num_experts == 0) return false;
    for (std::int64_t l : mlp_only_layers)
        if (l == index) return false;
    return (index + 1) % decoder_sparse_step == 0;
}

std::int64_t LlamaConfig::sparse_layers() const {
    std::int64_t n = 0;
    for (std::int64_t l = 0; l < num_hidden_layers; ++l) n += sparse_layer(l) ? 1 : 0;
    return n;
}

LayerAttention LlamaConfig::layer(std::int64_t index) const {
    const auto i = static_cast<std::size_t>(index);
    LayerAttention a{.sliding_window = sliding_window, .rope_theta = rope_theta, .rope_scaling = rope_scaling};
    if (!layer_types.empty() && layer_types.at(i) == "full_attention") a.sliding_window = 0;
    if (!layer_types.empty() && layer_types.at(i) == "sliding_attention" && rope_local_base_freq > 0) {
        a.rope_theta = rope_local_base_freq;
        a.rope_scaling.reset();
    }
    if (!no_rope_layers.empty() && no_rope_layers.at(i) == 0) {
        a.rope_theta = 0;
        a.rope_scaling.reset();
    }
    return a;
}

LlamaConfig parse_llama_config(const nlohmann::json& j, const std::string& source) {
    LEVERS_CHECK(j.is_object(), "{}: not a JSON object", source);
    LlamaConfig c;
    c.model_type = field<std::string>(j, "model_type", source);
    bool known = false;
    for (auto [t, a] : kTypes) known |= t == c.model_type;
    LEVERS_CHECK(known, "{}: model_type \"{}\" is not supported; levers reads {}", source, c.model_type,
                 supported_model_types());
    const bool gemma = is_gemma(c.model_type);
    // Gemma names it hidden_activation (its hidden_act, where present, is not what runs).
    const char* act_key = gemma ? "hidden_activation" : "hidden_act";
    c.hidden_act = field<std::string>(j, act_key, source, std::string(gemma ? "gelu_pytorch_tanh" : "silu"));
    LEVERS_CHECK(c.hidden_act == "silu" || c.hidden_act == "gelu_pytorch_tanh", "{}: {} \"{}\" is not supported; "
                 "levers runs \"silu\" and \"gelu_pytorch_tanh\"", source, act_key, c.hidden_act);
    c.vocab_size = field<std::int64_t>(j, "vocab_size", source);
    c.hidden_size = field<std::int64_t>(j, "hidden_size", source);
    c.intermediate_size = field<std::int64_t>(j, "intermediate_size", source);
    c.num_hidden_layers = field<std::int64_t>(j, "num_hidden_layers", source);
    c.num_attention_heads = field<std::int64_t>(j, "num_attention_heads", source);
    c.num_key_value_heads = field<std::int64_t>(j, "num_key_value_heads", source, c.num_attention_heads);
    c.head_dim = field<std::int64_t>(j, "head_dim", source, std::int64_t{0});
    c.max_position_embeddings = field<std::int64_t>(j, "max_position_embeddings", source, std::int64_t{2048});
    c.rms_norm_eps = field<double>(j, "rms_norm_eps", source, 1e-6);
    // transformers' defaults where config.json has none.
    const double theta = c.model_type == "gemma3_text" ? 1e6 : c.model_type == "smollm3" ? 2e6 : 10000.0;
    c.rope_theta = field<double>(j, "rope_theta", source, theta);
    c.initializer_range = field<double>(j, "initializer_range", source, 0.02);
    c.rope_scaling = rope_scaling(j, source);
    c.partial_rotary_factor = field<double>(j, "partial_rotary_factor", source, 1.0);
    c.fused_projections = c.model_type == "phi3";
    c.attention_bias = c.model_type == "qwen2" || field<bool>(j, "attention_bias", source, false);
    c.mlp_bias = field<bool>(j, "mlp_bias", source, false);
    c.qk_norm = c.model_type == "qwen3" || c.model_type == "qwen3_moe" || c.model_type == "gemma3_text";
    if (c.model_type == "mistral" || c.model_type == "smollm3" || c.model_type == "phi3" || c.model_type == "mixtral")
        c.sliding_window = field<std::int64_t>(j, "sliding_window", source, std::int64_t{0});
    if (c.model_type == "qwen2" || c.model_type == "qwen3" || c.model_type == "qwen3_moe")
        LEVERS_CHECK(!field<bool>(j, "use_sliding_window", source, false), "{}: use_sliding_window is true; levers "
                     "runs {} with full attention only", source, c.model_type);
    c.tie_word_embeddings = field<bool>(j, "tie_word_embeddings", source, gemma);
    if (gemma) {
        c.norm_offset = 1;
        c.sandwich_norms = true;
        c.scale_embeddings = true;
        c.sliding_window = field<std::int64_t>(j, "sliding_window", source, std::int64_t{4096});
        c.query_pre_attn_scalar = field<double>(j, "query_pre_attn_scalar", source, 256.0);
        const bool two = c.model_type == "gemma2";
        c.final_logit_softcapping = field<double>(j, "final_logit_softcapping", source, two ? 30.0 : 0.0);
        // Gemma 3's attention takes no soft cap (transformers ignores the key there).
        if (two) c.attn_logit_softcapping = field<double>(j, "attn_logit_softcapping", source, 50.0);
        if (c.model_type == "gemma3_text")
            c.rope_local_base_freq = field<double>(j, "rope_local_base_freq", source, 10000.0);
        LEVERS_CHECK(c.query_pre_attn_scalar > 0 && c.final_logit_softcapping >= 0 && c.attn_logit_softcapping >= 0,
                     "{}: query_pre_attn_scalar ({}) must be positive and the soft caps ({}, {}) >= 0", source,
                     c.query_pre_attn_scalar, c.final_logit_softcapping, c.attn_logit_softcapping);
    }
    if (c.model_type == "mixtral" || c.model_type == "qwen3_moe") experts(c, j, source);
    per_layer(c, j, source);
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
    LEVERS_CHECK(hidden_act == "silu" || hidden_act == "gelu_pytorch_tanh",
                 "hidden_act \"{}\" is not supported; levers runs \"silu\" and \"gelu_pytorch_tanh\"", hidden_act);
    const auto n = static_cast<std::size_t>(num_hidden_layers);
    LEVERS_CHECK(layer_types.empty() || layer_types.size() == n, "layer_types has {} entries for {} layers",
                 layer_types.size(), n);
    LEVERS_CHECK(no_rope_layers.empty() || no_rope_layers.size() == n, "no_rope_layers has {} entries for {} layers",
                 no_rope_layers.size(), n);
    LEVERS_CHECK(norm_offset == 0 || norm_offset == 1, "norm_offset is 0 (weight) or 1 (1 + weight), got {}",
                 norm_offset);
    LEVERS_CHECK(partial_rotary_factor > 0 && partial_rotary_factor <= 1 && rotary_dim() >= 2 && rotary_dim() % 2 == 0,
                 "partial_rotary_factor {} must be in (0, 1] and turn an even number (>= 2) of a head's {} elements; it "
                 "turns {}", partial_rotary_factor, head_size(), rotary_dim());
    if (num_experts > 0) {
        const char* experts_key = model_type == "mixtral" ? "num_local_experts" : "num_experts";
        LEVERS_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_experts,
                     "num_experts_per_tok = {} of {} experts ({}); give 1..{}", num_experts_per_tok, num_experts,
                     experts_key, num_experts);
        LEVERS_CHECK(moe_intermediate_size >= 1, "moe_intermediate_size must be >= 1, got {}", moe_intermediate_size);
        LEVERS_CHECK(decoder_sparse_step >= 1, "decoder_sparse_step must be >= 1, got {}", decoder_sparse_step);
        for (std::int64_t l : mlp_only_layers)
            LEVERS_CHECK(l >= 0 && l < num_hidden_layers, "mlp_only_layers holds {}; the layers are 0..{}", l,
                         num_hidden_layers - 1);
        LEVERS_CHECK(router_aux_loss_coef >= 0, "router_aux_loss_coef must be >= 0, got {}", router_aux_loss_coef);
    }
    if (rope_scaling && rope_scaling->kind == nn::RopeScaling::Kind::longrope)
        LEVERS_CHECK(rope_scaling->short_factor.size() == static_cast<std::size_t>(rotary_dim() / 2) &&
                         rope_scaling->long_factor.size() == rope_scaling->short_factor.size(),
                     "rope_scaling's short_factor and long_factor have {} and {} entries; a head turning {} elements "
                     "needs {} each", rope_scaling->short_factor.size(), rope_scaling->long_factor.size(), rotary_dim(),
                     rotary_dim() / 2);
}

std::int64_t LlamaConfig::parameter_count() const {
    const std::int64_t d = hidden_size, hd = head_size(), q = num_attention_heads * hd, kv = num_key_value_heads * hd;
    const std::int64_t attention = d * q + 2 * d * kv + q * d + (attention_bias ? q + 2 * kv : 0) + (qk_norm ? 2 * hd : 0);
    const std::int64_t mlp = 3 * d * intermediate_size + (mlp_bias ? 2 * intermediate_size + d : 0);
    const std::int64_t experts = d * num_experts + num_experts * 3 * d * moe_intermediate_size;
    std::int64_t layers = 0;
    for (std::int64_t l = 0; l < num_hidden_layers; ++l)
        layers += attention + (sparse_layer(l) ? experts : mlp) + (sandwich_norms ? 4 : 2) * d;
    return vocab_size * d * (tie_word_embeddings ? 1 : 2) + layers + d;
}

std::int64_t LlamaConfig::active_parameter_count() const {
    const std::int64_t idle = num_experts - num_experts_per_tok;
    return parameter_count() - sparse_layers() * idle * 3 * hidden_size * moe_intermediate_size;
}

nlohmann::json LlamaConfig::to_json() const {
    nlohmann::json j = original;
    if (j.is_null()) {
        j = {{"architectures", {architecture(model_type)}}, {"model_type", model_type}, {"vocab_size", vocab_size},
             {"hidden_size", hidden_size}, {"intermediate_size", intermediate_size},
             {"num_hidden_layers", num_hidden_layers}, {"num_attention_heads", num_attention_heads},
             {"num_key_value_heads", num_key_value_heads}, {"max_position_embeddings", max_position_embeddings},
             {"rms_norm_eps", rms_norm_eps}, {"rope_theta", rope_theta},
             {is_gemma(model_type) ? "hidden_activation" : "hidden_act", hidden_act},
             {"initializer_range", initializer_range}, {"tie_word_embeddings", tie_word_embeddings}};
        if (head_dim > 0) j["head_dim"] = head_dim;
        if (model_type != "qwen2") j["attention_bias"] = attention_bias;
        if (model_type == "llama") j["mlp_bias"] = mlp_bias;
        if (model_type == "mistral" || model_type == "phi3" || model_type == "mixtral" || !layer_types.empty())
            j["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nullptr;
        if (!layer_types.empty()) j["layer_types"] = layer_types;
        if (!no_rope_layers.empty()) j["no_rope_layers"] = no_rope_layers;
        if (is_gemma(model_type)) {
            j["query_pre_attn_scalar"] = query_pre_attn_scalar;
            const auto cap = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
            j["final_logit_softcapping"] = cap(final_logit_softcapping);
            j["attn_logit_softcapping"] = cap(attn_logit_softcapping);
            if (rope_local_base_freq > 0) j["rope_local_base_freq"] = rope_local_base_freq;
        }
        if (partial_rotary_factor != 1) j["partial_rotary_factor"] = partial_rotary_factor;
        if (num_experts > 0) {
            j[model_type == "mixtral" ? "num_local_experts" : "num_experts"] = num_experts;
            j["num_experts_per_tok"] = num_experts_per_tok;
            j["router_aux_loss_coef"] = router_aux_loss_coef;
            j["output_router_logits"] = output_router_logits;
            if (model_type == "qwen3_moe") {
                j["moe_intermediate_size"] = moe_intermediate_size;
                j["norm_topk_prob"] = norm_topk_prob;
                j["decoder_sparse_step"] = decoder_sparse_step;
                j["mlp_only_layers"] = mlp_only_layers;
            }
        }
        if (rope_scaling && rope_scaling->kind == nn::RopeScaling::Kind::linear)
            j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling->factor}};
        else if (rope_scaling && rope_scaling->kind == nn::RopeScaling::Kind::longrope) {
            j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", rope_scaling->short_factor},
                                 {"long_factor", rope_scaling->long_factor},
                                 {"attention_factor", rope_scaling->attention_factor}};
            j["original_max_position_embeddings"] = rope_scaling->original_max_position_embeddings;
        }
        else if (rope_scaling)
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

#include "levers/models/gguf_export.hpp"

#include "levers/core/dtype.hpp"
#include "levers/core/error.hpp"
#include "levers/data/gguf.hpp"
#include "levers/data/half.hpp"
#include "levers/data/mapped_file.hpp"
#include "levers/models/gguf_vocab.hpp"
#include "levers/models/hf_dir.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <numbers>
#include <optional>
#include <regex>

namespace levers::models {

namespace fs = std::filesystem;
using data::GgmlType;
using data::GgufValue;

namespace {

// A file type as llama.cpp's quantizer names it, with its general.file_type id.
struct FileType {
    const char* name;
    std::uint32_t id;
    GgmlType base;  // most tensors' type
};
constexpr FileType kFileTypes[] = {
    {"f32", 0, GgmlType::f32},     {"f16", 1, GgmlType::f16},       {"bf16", 32, GgmlType::bf16},
    {"q8_0", 7, GgmlType::q8_0},   {"q4_0", 2, GgmlType::q4_0},     {"q4_k_m", 15, GgmlType::q4_K},
    {"q5_k_m", 17, GgmlType::q5_K}, {"q6_k", 18, GgmlType::q6_K},
};

const FileType& file_type(const std::string& name) {
    for (const auto& t : kFileTypes)
        if (name == t.name) return t;
    LEVERS_FAIL("type={} is not a GGUF file type levers writes ({})", name, gguf_file_types());
}

struct Arch {
    const char* name;  // general.architecture
    bool interleave_qk;  // llama.cpp's llama rotates adjacent pairs: q and k rows reordered from HF's halves
    std::int64_t sliding_period = 0;  // > 0: sliding_window_pattern, where it differs from llama.cpp's default
};

// llama.cpp's sliding layers repeat with a period p: layer i slides where i % p < p - 1 (p = 1: none).
std::optional<std::int64_t> sliding_period(const LlamaConfig& c) {
    for (std::int64_t p = 1; p <= c.num_hidden_layers + 1; ++p) {
        bool fits = true;
        for (std::int64_t i = 0; i < c.num_hidden_layers && fits; ++i)
            fits = (c.layer(i).sliding_window > 0) == (i % p < p - 1);
        if (fits) return p;
    }
    return std::nullopt;
}

// Gemma's checks: what llama.cpp's gemma2 and gemma3 hard-code must be what the model does.
Arch gemma_arch(const LlamaConfig& c, const std::string& where, const char* name, std::int64_t default_period,
                std::int64_t layers_27b) {
    LEVERS_CHECK(c.hidden_act == "gelu_pytorch_tanh", "{}: hidden_act {}, and llama.cpp's {} architecture computes "
                 "gelu_pytorch_tanh", where, c.hidden_act, name);
    LEVERS_CHECK(!c.attention_bias, "{}: attention_bias is true, and llama.cpp's {} architecture has no attention "
                 "biases", where, name);
    // llama.cpp scales queries by head size^-1/2, or (hidden / heads)^-1/2 for the 27B's layer count.
    const std::int64_t scale = c.num_hidden_layers == layers_27b ? c.hidden_size / c.num_attention_heads : c.head_size();
    const double asked = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_size());
    LEVERS_CHECK(asked == static_cast<double>(scale), "{}: query_pre_attn_scalar {}, and llama.cpp's {} architecture "
                 "scales queries by {}^-1/2 at {} layers", where, asked, name, scale, c.num_hidden_layers);
    const auto period = sliding_period(c);
    LEVERS_CHECK(period.has_value(), "{}: layer_types {} has no form in llama.cpp's {} architecture (sliding layers "
                 "repeating with a period, each period ending in one full_attention layer)", where,
                 fmt::join(c.layer_types, ","), name);
    return Arch{name, false, *period == default_period ? 0 : *period};
}

Arch arch_of(const LlamaConfig& c, const fs::path& dir) {
    const std::string where = (dir / "config.json").string();
    std::optional<Arch> arch;
    if (c.model_type == "llama" || c.model_type == "mistral") arch = Arch{"llama", true};
    if (c.model_type == "qwen2") arch = Arch{"qwen2", false};
    if (c.model_type == "qwen3") arch = Arch{"qwen3", false};
    if (c.model_type == "smollm3") {
        // llama.cpp's smollm3 is llama's with every fourth layer unrotated, fixed: a config that leaves out
        // others, or slides a window, has no form there.
        for (std::size_t i = 0; i < c.no_rope_layers.size(); ++i)
            LEVERS_CHECK(c.no_rope_layers[i] == ((i + 1) % 4 != 0 ? 1 : 0), "{}: no_rope_layers {} rotates layer {} "
                         "otherwise than llama.cpp's smollm3 architecture (every fourth layer without rope)", where,
                         fmt::join(c.no_rope_layers, ","), i);
        for (const auto& t : c.layer_types)
            LEVERS_CHECK(t != "sliding_attention", "{}: a sliding_attention layer, and llama.cpp's smollm3 "
                         "architecture has no sliding window", where);
        arch = Arch{"smollm3", true};
    }
    if (c.model_type == "gemma2") {
        LEVERS_CHECK(c.tie_word_embeddings, "{}: tie_word_embeddings is false, and llama.cpp's gemma2 architecture "
                     "takes the embeddings as the output", where);
        arch = gemma_arch(c, where, "gemma2", 2, 46);
    }
    if (c.model_type == "gemma3_text") {
        LEVERS_CHECK(c.attn_logit_softcapping == 0, "{}: attn_logit_softcapping {}, and llama.cpp's gemma3 "
                     "architecture caps no attention scores", where, c.attn_logit_softcapping);
        arch = gemma_arch(c, where, "gemma3", 6, 62);
    }
    if (c.model_type == "phi3") {
        LEVERS_CHECK(!c.attention_bias, "{}: attention_bias is true, and llama.cpp's phi3 architecture has no "
                     "attention biases", where);
        LEVERS_CHECK(c.head_size() * c.num_attention_heads == c.hidden_size, "{}: heads of {} x {} make {} wide, and "
                     "llama.cpp's phi3 architecture takes attention as wide as hidden_size {}", where,
                     c.num_attention_heads, c.head_size(), c.head_size() * c.num_attention_heads, c.hidden_size);
        arch = Arch{"phi3", false};
    }
    LEVERS_CHECK(arch.has_value(), "{}: model_type {} has no GGUF export in levers yet; it exports {}", where,
                 c.model_type, gguf_model_types());
    LEVERS_CHECK(!c.mlp_bias, "{}: mlp_bias is true, and llama.cpp's {} architecture has no MLP biases", where,
                 arch->name);
    LEVERS_CHECK(c.model_type == "phi3" || !c.rope_scaling || c.rope_scaling->kind != nn::RopeScaling::Kind::longrope,
                 "{}: longrope scaling has no form in llama.cpp's {} architecture", where, arch->name);
    return *arch;
}

// HF names inside model.layers.N. -> llama.cpp's inside blk.N., in the order they are written.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // phi3's fused q, k, v
    {"post_attention_layernorm.weight", "ffn_norm.weight"},  // Gemma's: post_attention_norm (below)
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},  // phi3's gate and up, one product, as llama.cpp takes them
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

// One tensor of the file.
struct Planned {
    std::string name;
    const data::StoredTensor* source = nullptr;  // from the directory, or
    std::vector<float> values;                   // made here (rope_freqs)
    std::vector<std::int64_t> dims;              // innermost first
    GgmlType type = GgmlType::f32;
    std::int64_t interleave_heads = 0;  // > 0: rows reordered, this many heads
    float offset = 0;                   // added to every value (Gemma's norms: 1 + weight)
    std::pair<std::int64_t, int> order;  // (layer, slot); -1 before the layers, n_layers after
};

// llama.cpp's rule for the layers that get more bits in its _M mixes.
bool more_bits(std::int64_t layer, std::int64_t layers) {
    return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// The tensor's type in `ft`, as llama.cpp's quantizer chooses it (tied: the
// embeddings are also the output). A fallback is noted.
GgmlType choose_type(const FileType& ft, const Planned& t, std::int64_t layers, bool tied,
                     std::vector<std::string>& notes) {
    const bool matrix = t.dims.size() >= 2 && t.name.ends_with(".weight") && t.name.find("_norm.") == std::string::npos;
    if (!matrix) return GgmlType::f32;
    if (ft.base == GgmlType::f32 || ft.base == GgmlType::f16 || ft.base == GgmlType::bf16) return ft.base;
    const std::int64_t cols = t.dims[0];
    const bool k_mix = ft.id == 15 || ft.id == 17;  // q4_k_m, q5_k_m
    GgmlType type = ft.base;
    const std::int64_t layer = t.order.first;
    if (t.name == "output.weight" || (tied && t.name == "token_embd.weight")) {
        type = cols % data::ggml_type_info(ft.base)->block != 0 ? GgmlType::q8_0
               : ft.base != GgmlType::q8_0                      ? GgmlType::q6_K
                                                                : GgmlType::q8_0;
    } else if (k_mix && (t.name.ends_with("attn_v.weight") || t.name.ends_with("ffn_down.weight")) &&
               more_bits(layer, layers)) {
        type = GgmlType::q6_K;
    } else if (k_mix && t.name.ends_with("attn_qkv.weight")) {
        type = ft.id == 15 ? GgmlType::q5_K : GgmlType::q6_K;  // a step above the mix's base, on every layer
    }
    const auto block = [](GgmlType x) { return data::ggml_type_info(x)->block; };
    if (cols % block(type) == 0) return type;
    GgmlType fallback = type == GgmlType::q4_K   ? GgmlType::q5_0
                        : type == GgmlType::q5_K ? GgmlType::q5_1
                        : type == GgmlType::q6_K ? GgmlType::q8_0
                                                 : type;
    if (cols % block(fallback) != 0) fallback = GgmlType::f16;
    notes.push_back(fmt::format("{}: rows of {} values, not a multiple of {} ({}): {} instead, as llama.cpp falls back",
                                t.name, cols, block(type), data::ggml_type_name(type), data::ggml_type_name(fallback)));
    return fallback;
}

// Llama 3's rope scaling as llama.cpp takes it: a factor per rotated frequency.
std::vector<float> llama3_rope_factors(const LlamaConfig& c) {
    const nn::RopeScaling& s = *c.rope_scaling;
    const std::int64_t dim = c.head_size();
    const double low_wavelen = static_cast<double>(s.original_max_position_embeddings) / s.low_freq_factor;
    const double high_wavelen = static_cast<double>(s.original_max_position_embeddings) / s.high_freq_factor;
    std::vector<float> factors;
    for (std::int64_t i = 0; i < dim; i += 2) {
        const double freq = 1.0 / std::pow(c.rope_theta, static_cast<double>(i) / static_cast<double>(dim));
        const double wavelen = 2 * std::numbers::pi / freq;
        double f = 1;
        if (wavelen > low_wavelen) {
            f = s.factor;
        } else if (wavelen >= high_wavelen) {
            const double smooth = (static_cast<double>(s.original_max_position_embeddings) / wavelen - s.low_freq_factor) /
                                  (s.high_freq_factor - s.low_freq_factor);
            f = 1 / ((1 - smooth) / s.factor + smooth);
        }
        factors.push_back(static_cast<float>(f));
    }
    return factors;
}

std::vector<Planned> plan_tensors(const LlamaConfig& c, const Arch& arch, const HfWeights& weights,
                                  const fs::path& dir) {
    std::vector<Planned> plan;
    static const std::regex layer_name(R"(model\.layers\.(\d+)\.(.+))");
    for (const auto& [hf, stored] : weights.tensors) {
        if (hf.ends_with("rotary_emb.inv_freq")) continue;  // a buffer older checkpoints kept
        Planned t;
        t.source = stored;
        std::smatch m;
        if (hf == "model.embed_tokens.weight") {
            t.name = "token_embd.weight", t.order = {-1, 0};
        } else if (hf == "model.norm.weight") {
            t.name = "output_norm.weight", t.order = {c.num_hidden_layers, 0};
        } else if (hf == "lm_head.weight") {
            if (c.tie_word_embeddings) continue;  // the embeddings serve
            t.name = "output.weight", t.order = {c.num_hidden_layers, 1};
        } else if (std::regex_match(hf, m, layer_name)) {
            const auto it = std::find_if(std::begin(kLayerNames), std::end(kLayerNames),
                                         [&](const auto& p) { return m[2] == p.first; });
            LEVERS_CHECK(it != std::end(kLayerNames), "{}: tensor {} ({}) has no name in llama.cpp's {} architecture",
                         dir.string(), hf, weights.file_of.at(hf), arch.name);
            const bool post_attention = m[2] == "post_attention_layernorm.weight" && c.sandwich_norms;
            t.name = fmt::format("blk.{}.{}", m[1].str(), post_attention ? "post_attention_norm.weight" : it->second);
            t.order = {std::stoll(m[1].str()), static_cast<int>(it - std::begin(kLayerNames))};
            const bool q = m[2].str().starts_with("self_attn.q_proj"), k = m[2].str().starts_with("self_attn.k_proj");
            if (arch.interleave_qk && (q || k)) t.interleave_heads = q ? c.num_attention_heads : c.num_key_value_heads;
        } else {
            LEVERS_FAIL("{}: tensor {} ({}) has no name in llama.cpp's {} architecture", dir.string(), hf,
                        weights.file_of.at(hf), arch.name);
        }
        if (hf.ends_with("norm.weight")) t.offset = static_cast<float>(c.norm_offset);
        const auto dims = stored->shape.dims();
        t.dims.assign(dims.rbegin(), dims.rend());
        plan.push_back(std::move(t));
    }
    if (c.rope_scaling && c.rope_scaling->kind == nn::RopeScaling::Kind::llama3) {
        Planned t;
        t.name = "rope_freqs.weight", t.order = {-1, 1};
        t.values = llama3_rope_factors(c);
        t.dims = {static_cast<std::int64_t>(t.values.size())};
        plan.push_back(std::move(t));
    }
    if (c.rope_scaling && c.rope_scaling->kind == nn::RopeScaling::Kind::longrope) {  // phi3's, per frequency
        int slot = 1;
        for (const auto* factors : {&c.rope_scaling->long_factor, &c.rope_scaling->short_factor}) {
            Planned t;
            t.name = slot == 1 ? "rope_factors_long.weight" : "rope_factors_short.weight", t.order = {-1, slot++};
            t.values.assign(factors->begin(), factors->end());
            t.dims = {static_cast<std::int64_t>(t.values.size())};
            plan.push_back(std::move(t));
        }
    }
    std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) { return a.order < b.order; });
    return plan;
}

void set_architecture(data::GgufWriter& w, const LlamaConfig& c, const Arch& arch, const FileType& ft,
                      const std::string& name) {
    const std::string a = arch.name;
    auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
    w.set("general.architecture", GgufValue::string(a));
    w.set("general.name", GgufValue::string(name));
    w.set("general.file_type", GgufValue::u32(ft.id));
    w.set("general.quantization_version", GgufValue::u32(2));
    w.set(a + ".block_count", u32(c.num_hidden_layers));
    w.set(a + ".context_length", u32(c.max_position_embeddings));
    w.set(a + ".embedding_length", u32(c.hidden_size));
    w.set(a + ".feed_forward_length", u32(c.intermediate_size));
    w.set(a + ".attention.head_count", u32(c.num_attention_heads));
    w.set(a + ".attention.head_count_kv", u32(c.num_key_value_heads));
    w.set(a + ".rope.freq_base", GgufValue::f32(c.rope_theta));
    w.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_norm_eps));
    const bool gemma = a == "gemma2" || a == "gemma3";
    if (c.head_dim > 0 || gemma) {
        w.set(a + ".attention.key_length", u32(c.head_size()));
        w.set(a + ".attention.value_length", u32(c.head_size()));
    }
    if (gemma) {
        bool sliding = false;
        for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) sliding = sliding || c.layer(i).sliding_window > 0;
        if (sliding) w.set(a + ".attention.sliding_window", u32(c.sliding_window));
        if (sliding && arch.sliding_period > 0)
            w.set(a + ".attention.sliding_window_pattern", u32(arch.sliding_period));
        if (c.attn_logit_softcapping > 0)
            w.set(a + ".attn_logit_softcapping", GgufValue::f32(c.attn_logit_softcapping));
        if (c.final_logit_softcapping > 0)
            w.set(a + ".final_logit_softcapping", GgufValue::f32(c.final_logit_softcapping));
        if (a == "gemma3" && sliding)  // the sliding layers' own base, unscaled
            w.set(a + ".rope.freq_base_swa",
                  GgufValue::f32(c.rope_local_base_freq > 0 ? c.rope_local_base_freq : c.rope_theta));
    }
    if (a == "phi3") {
        const auto& original = c.original;
        const std::int64_t original_context =
            c.rope_scaling ? c.rope_scaling->original_max_position_embeddings
                           : original.value("original_max_position_embeddings", c.max_position_embeddings);
        w.set(a + ".rope.dimension_count", u32(c.rotary_dim()));
        w.set(a + ".rope.scaling.original_context_length", u32(original_context));
        w.set(a + ".attention.sliding_window", u32(c.sliding_window));
        if (c.rope_scaling && c.rope_scaling->kind == nn::RopeScaling::Kind::longrope)
            w.set(a + ".rope.scaling.attn_factor", GgufValue::f32(c.rope_scaling->attention_factor));
    }
    if (a == "llama" || a == "smollm3") {  // llama.cpp's converter writes these for its llama family
        w.set(a + ".vocab_size", u32(c.vocab_size));
        w.set(a + ".rope.dimension_count", u32(c.head_size()));
    }
    if (c.rope_scaling && c.rope_scaling->kind == nn::RopeScaling::Kind::linear) {
        w.set(a + ".rope.scaling.type", GgufValue::string("linear"));
        w.set(a + ".rope.scaling.factor", GgufValue::f32(c.rope_scaling->factor));
    }
}

// Row `r` of a stored 2-d (or 1-d: r = 0) tensor as f32.
void read_row(const data::StoredTensor& t, std::int64_t r, std::int64_t cols, float* out) {
    const auto n = static_cast<std::size_t>(cols);
    const std::byte* p = t.data + static_cast<std::size_t>(r) * n * data::stored_bytes(1, t.dtype);
    if (t.dtype == "F32") {
        std::memcpy(out, p, n * 4);
    } else if (t.dtype == "F64") {
        for (std::size_t i = 0; i < n; ++i) {
            double v;
            std::memcpy(&v, p + i * 8, 8);
            out[i] = static_cast<float>(v);
        }
    } else {
        std::vector<std::uint16_t> h(n);
        std::memcpy(h.data(), p, n * 2);
        if (t.dtype == "BF16")
            for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(h[i]);
        else
            for (std::size_t i = 0; i < n; ++i) out[i] = data::half_to_float(h[i]);
    }
}

// The source row of output row `r` when rows are interleaved: within each
// head, HF's two halves (pair i in rows i and i + d/2) become adjacent rows 2i, 2i + 1.
std::int64_t source_row(std::int64_t r, std::int64_t rows, std::int64_t heads) {
    if (heads == 0) return r;
    const std::int64_t d = rows / heads, h = r / d, within = r % d;
    return h * d + (within % 2) * (d / 2) + within / 2;
}

void write_tensor(data::GgufWriter& w, const Planned& t) {
    if (!t.source) {
        w.write_tensor(reinterpret_cast<const std::byte*>(t.values.data()), t.values.size() * sizeof(float));
        return;
    }
    const std::int64_t cols = t.dims[0];
    const std::int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    const std::size_t row_bytes = data::ggml_row_bytes(t.type, cols);
    // A slice of about 16 MiB of f32 at a time: the threads' work, and all the memory the tensor takes.
    const std::int64_t slice = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (cols * 4));
    std::vector<std::byte> out(static_cast<std::size_t>(std::min(slice, rows)) * row_bytes);
    for (std::int64_t first = 0; first < rows; first += slice) {
        const std::int64_t n = std::min(slice, rows - first);
#pragma omp parallel
        {
            std::vector<float> row(static_cast<std::size_t>(cols));
#pragma omp for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) {
                read_row(*t.source, source_row(first + i, rows, t.interleave_heads), cols, row.data());
                if (t.offset != 0)
                    for (float& v : row) v += t.offset;
                data::ggml_quantize_row(t.type, row.data(), out.data() + static_cast<std::size_t>(i) * row_bytes, cols);
            }
        }
        w.write_tensor(out.data(), static_cast<std::size_t>(n) * row_bytes);
    }
    data::release_pages(t.source->data, t.source->bytes);  // read once: resident memory stays one slice
}

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        out += ch;
    }
    return out + "\"";
}

fs::path modelfile_of(const fs::path& out) { return out.parent_path() / "Modelfile"; }

void write_modelfile(const fs::path& path, const fs::path& gguf, const std::vector<std::string>& stop) {
    const fs::path temporary = path.string() + ".tmp";
    {
        std::ofstream f(temporary);
        f << "# Ollama: `ollama create NAME` in this directory (or `ollama create NAME -f " << path.filename().string()
          << "`).\n";
        f << "# The chat template is read from the file's tokenizer.chat_template.\n";
        f << "FROM ./" << gguf.filename().string() << "\n";
        for (const auto& s : stop) f << "PARAMETER stop " << quoted(s) << "\n";
        LEVERS_CHECK(f.good(), "cannot write {}", temporary.string());
    }
    fs::rename(temporary, path);
}

}  // namespace

const char* gguf_file_types() { return "f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k"; }
void check_gguf_file_type(const std::string& type) { file_type(type); }
const char* gguf_model_types() {
    return "llama (Llama 2, 3, 3.1, 3.2), mistral, qwen2, qwen3, smollm3, gemma2, gemma3_text, phi3 (Phi-3, Phi-4)";
}

namespace {

// What the checks read and the export writes from. The vocabulary of the
// last directory read is kept (while its tokenizer files are unchanged): a
// recipe's check step and its run read a 128k-token tokenizer.json once.
struct Source {
    LlamaConfig config;
    Arch arch;
    std::shared_ptr<const GgufVocab> vocab;
};

Source checked_source(const fs::path& dir) {
    static std::mutex mutex;
    static std::string last_key;
    static std::shared_ptr<const GgufVocab> last_vocab;
    Source src{.config = check_hf_dir(dir), .arch = {}, .vocab = {}};
    src.arch = arch_of(src.config, dir);
    std::error_code ec;
    std::string key = fs::weakly_canonical(dir, ec).string() + '\n' + std::to_string(src.config.vocab_size);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
        const auto time = fs::last_write_time(dir / f, ec);
        key += '\n' + (ec ? std::string("-") : std::to_string(time.time_since_epoch().count()));
    }
    const std::lock_guard lock(mutex);
    if (key != last_key || !last_vocab) {
        last_vocab = std::make_shared<const GgufVocab>(gguf_vocab(dir, src.config));
        last_key = key;
    }
    src.vocab = last_vocab;
    return src;
}

void check_output(const fs::path& out, const GgufExportOptions& options) {
    LEVERS_CHECK(out.extension() == ".gguf", "to={}: give a file name ending in .gguf", out.string());
    LEVERS_CHECK(!fs::is_directory(out), "to={} is a directory; give a file name ending in .gguf", out.string());
    if (!options.overwrite) {
        LEVERS_CHECK(!fs::exists(out), "{} exists; --set overwrite=true replaces it", out.string());
        LEVERS_CHECK(!options.modelfile || !fs::exists(modelfile_of(out)),
                     "{} exists; --set overwrite=true replaces it (with the Modelfile of the new file)",
                     modelfile_of(out).string());
    }
}

}  // namespace

void check_gguf_source(const fs::path& model_dir) { checked_source(model_dir); }

void check_gguf_export(const fs::path& model_dir, const fs::path& out, const GgufExportOptions& options) {
    file_type(options.type);
    check_output(out, options);
    checked_source(model_dir);
}

GgufExportReport export_gguf(const fs::path& model_dir, const fs::path& out, const GgufExportOptions& options) {
    const FileType& ft = file_type(options.type);
    check_output(out, options);
    const Source src = checked_source(model_dir);
    const LlamaConfig& config = src.config;
    const Arch& arch = src.arch;
    const GgufVocab& vocab = *src.vocab;
    const HfWeights weights = open_hf_weights(model_dir);

    GgufExportReport report;
    report.file = out;
    report.architecture = arch.name;
    std::vector<Planned> plan = plan_tensors(config, arch, weights, model_dir);
    const bool tied = std::none_of(plan.begin(), plan.end(), [](const Planned& t) { return t.name == "output.weight"; });
    for (auto& t : plan) t.type = choose_type(ft, t, config.num_hidden_layers, tied, report.notes);
    if (arch.interleave_qk && config.sliding_window > 0)
        report.notes.push_back(fmt::format("sliding_window {} not written: llama.cpp's llama architecture has none "
                                           "(its own converter leaves it out too)",
                                           config.sliding_window));
    if (arch.name == std::string("phi3") && config.sliding_window > 0)
        report.notes.push_back(fmt::format("sliding_window {} written as llama.cpp's converter writes it; llama.cpp's "
                                           "phi3 architecture runs without it, attending to every earlier position",
                                           config.sliding_window));

    if (!out.parent_path().empty()) fs::create_directories(out.parent_path());
    data::GgufWriter writer(out);
    std::string name = options.name.empty() ? fs::weakly_canonical(model_dir).filename().string() : options.name;
    set_architecture(writer, config, arch, ft, name.empty() ? "model" : name);
    for (const auto& [key, value] : vocab.metadata) writer.set(key, value);
    for (const auto& t : plan) writer.add_tensor(t.name, t.dims, t.type);
    writer.begin_data();
    for (std::size_t i = 0; i < plan.size(); ++i) {
        write_tensor(writer, plan[i]);
        ++report.tensors_by_type[data::ggml_type_name(plan[i].type)];
        if (options.progress) options.progress(i + 1, plan.size(), plan[i].name, data::ggml_type_name(plan[i].type));
    }
    report.bytes = writer.finish();
    if (options.modelfile) {
        report.modelfile = modelfile_of(out);
        write_modelfile(report.modelfile, out, vocab.stop);
    }
    return report;
}

}  // namespace levers::models

#include "levers/models/bnb_4bit.hpp"

#include "levers/core/error.hpp"

#include <cstring>

namespace levers::models {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kStateSuffixes = {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                                                 ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"};

std::string where(const fs::path& dir, const HfWeights& w, const std::string& name) {
    const auto it = w.file_of.find(name);
    return (dir / (it == w.file_of.end() ? std::string("?") : it->second)).string();
}

// The weight's quant_state record: which of the two names it has, and its JSON.
std::pair<std::string, nlohmann::json> quant_state(const fs::path& dir, const HfWeights& w, const std::string& name) {
    std::string key;
    for (const char* type : {"nf4", "fp4"})
        if (w.tensors.count(name + ".quant_state.bitsandbytes__" + type)) key = name + ".quant_state.bitsandbytes__" + type;
    LEVERS_CHECK(!key.empty(), "{}: 4-bit weight '{}' has no quant_state ('{}.quant_state.bitsandbytes__nf4' or "
                 "__fp4); bitsandbytes saves one beside each 4-bit weight", where(dir, w, name), name, name);
    const data::StoredTensor& t = *w.tensors.at(key);
    LEVERS_CHECK(t.dtype == "U8", "{}: '{}' is {}; bitsandbytes stores it as U8 (JSON bytes)", where(dir, w, key), key,
                 t.dtype);
    const auto j = nlohmann::json::parse(reinterpret_cast<const char*>(t.data),
                                         reinterpret_cast<const char*>(t.data) + t.bytes, nullptr, false);
    LEVERS_CHECK(j.is_object(), "{}: '{}' is not the JSON of a quant state", where(dir, w, key), key);
    return {key, j};
}

// A tensor of the state, present and of `dtype` and `numel` values.
const data::StoredTensor& state_tensor(const fs::path& dir, const HfWeights& w, const std::string& name,
                                       const std::string& dtype, std::int64_t numel, const std::string& why) {
    const auto it = w.tensors.find(name);
    LEVERS_CHECK(it != w.tensors.end(), "{}: no tensor '{}'; {}", dir.string(), name, why);
    LEVERS_CHECK(it->second->dtype == dtype && it->second->shape.numel() == numel,
                 "{}: tensor '{}' is {} {}; {} needs {} values of {}", where(dir, w, name), name, it->second->dtype,
                 it->second->shape.str(), why, numel, dtype);
    return *it->second;
}

// The code book stored: bitsandbytes' own, bit for bit.
template <std::size_t N>
void check_code(const fs::path& dir, const HfWeights& w, const std::string& name, const std::array<float, N>& code,
                const char* what) {
    const data::StoredTensor& t = state_tensor(dir, w, name, "F32", N, what);
    for (std::size_t i = 0; i < N; ++i) {
        float v;
        std::memcpy(&v, t.data + 4 * i, 4);
        LEVERS_CHECK(v == code[i], "{}: '{}' is not {}: value {} is {}, not {}", where(dir, w, name), name, what, i, v,
                     code[i]);
    }
}

struct Stored4 {
    ops::Quantized4 q;  // shapes and scalars; tensors read only by read_4bit_weight
    bool double_quant = false;
};

Stored4 check_and_describe(const fs::path& dir, const HfWeights& w, const std::string& name, const Shape& shape) {
    const auto [key, j] = quant_state(dir, w, name);
    const std::string file = where(dir, w, key);
    auto field = [&](const char* k) {
        LEVERS_CHECK(j.contains(k) && !j.at(k).is_null(), "{}: '{}' has no \"{}\"", file, key, k);
        return j.at(k);
    };
    const std::string type = field("quant_type").get<std::string>();
    Stored4 out;
    out.q.type = ops::quant4_type(type, fmt::format("{}: '{}'", file, key));
    LEVERS_CHECK(key.ends_with(type), "{}: '{}' says quant_type \"{}\"", file, key, type);
    out.q.blocksize = field("blocksize").get<std::int64_t>();
    LEVERS_CHECK(out.q.blocksize >= 2 && out.q.blocksize % 2 == 0, "{}: '{}' has blocks of {} values; bitsandbytes' "
                 "are an even size (64 by default)", file, key, out.q.blocksize);
    out.q.shape = Shape(field("shape").get<std::vector<std::int64_t>>());
    LEVERS_CHECK(out.q.shape == shape, "{}: 4-bit weight '{}' is {} in its quant state; this config.json makes it {}",
                 file, name, out.q.shape.str(), shape.str());
    const std::int64_t n = shape.numel(), blocks = out.q.blocks();
    const data::StoredTensor& codes = *w.tensors.at(name);
    LEVERS_CHECK(codes.dtype == "U8" && codes.shape.numel() == (n + 1) / 2, "{}: 4-bit weight '{}' is {} {}; {} "
                 "values need {} bytes of packed codes (U8)", where(dir, w, name), name, codes.dtype,
                 codes.shape.str(), n, (n + 1) / 2);
    check_code(dir, w, name + ".quant_map", kernels::code_of(out.q.type), type == "nf4" ? "NF4's code book"
                                                                                             : "FP4's code book");
    out.double_quant = j.contains("nested_offset");
    const std::string blocks_why = fmt::format("'{}' ({} values in blocks of {})", name, n, out.q.blocksize);
    if (!out.double_quant) {
        state_tensor(dir, w, name + ".absmax", "F32", blocks, blocks_why);
        return out;
    }
    LEVERS_CHECK(field("nested_blocksize").get<std::int64_t>() == kernels::kNestedBlock, "{}: '{}' quantizes its "
                 "absmax in blocks of {}; bitsandbytes (and levers) use {}", file, key,
                 field("nested_blocksize").get<std::int64_t>(), kernels::kNestedBlock);
    out.q.offset = field("nested_offset").get<float>();
    state_tensor(dir, w, name + ".absmax", "U8", blocks, blocks_why + ", double-quantized");
    state_tensor(dir, w, name + ".nested_absmax", "F32", (blocks + kernels::kNestedBlock - 1) / kernels::kNestedBlock,
                 blocks_why + ", their absmax in blocks of 256");
    check_code(dir, w, name + ".nested_quant_map", kernels::kDynamicMap, "bitsandbytes' dynamic map");
    return out;
}

Tensor flat_f32(const data::StoredTensor& t) { return t.to_f32().view({t.shape.numel()}); }
Tensor flat_u8(const data::StoredTensor& t) { return t.to_u8().view({t.shape.numel()}); }

Tensor bytes_of(const std::string& text) {
    Tensor t = Tensor::empty({static_cast<std::int64_t>(text.size())}, DType::u8);
    std::memcpy(t.raw(), text.data(), text.size());
    return t;
}

Tensor table(const float* values, std::int64_t n) {
    return Tensor::from(std::vector<float>(values, values + n), {n});
}

}  // namespace

std::optional<ops::Quant4Spec> bnb_4bit_config(const LlamaConfig& config, const fs::path& config_json) {
    const nlohmann::json& j = config.original;
    if (!j.is_object() || !j.contains("quantization_config") || j.at("quantization_config").is_null())
        return std::nullopt;
    const nlohmann::json& q = j.at("quantization_config");
    const std::string file = config_json.string();
    const std::string method = q.is_object() && q.contains("quant_method") ? q.at("quant_method").get<std::string>() : "";
    LEVERS_CHECK(method == "bitsandbytes", "{}: quantization_config's quant_method is \"{}\"; levers reads "
                 "bitsandbytes' 4-bit weights (load_in_4bit), or a model in full precision (quantize= it on load)",
                 file, method);
    const bool four = q.value("load_in_4bit", false) || q.value("_load_in_4bit", false);
    LEVERS_CHECK(four, "{}: quantization_config is bitsandbytes' 8-bit (load_in_8bit); levers reads its 4-bit "
                 "weights (load_in_4bit), or a model in full precision", file);
    ops::Quant4Spec spec;
    spec.type = ops::quant4_type(q.value("bnb_4bit_quant_type", std::string("fp4")),
                                 file + ": quantization_config's bnb_4bit_quant_type");
    spec.double_quant = q.value("bnb_4bit_use_double_quant", false);
    return spec;
}

nlohmann::json bnb_quantization_config(const ops::Quant4Spec& spec, const std::string& compute_dtype) {
    return {{"quant_method", "bitsandbytes"},
            {"load_in_4bit", true},
            {"load_in_8bit", false},
            {"_load_in_4bit", true},
            {"_load_in_8bit", false},
            {"bnb_4bit_quant_type", std::string(ops::name_of(spec.type))},
            {"bnb_4bit_use_double_quant", spec.double_quant},
            {"bnb_4bit_compute_dtype", compute_dtype},
            {"bnb_4bit_quant_storage", "uint8"},
            {"llm_int8_enable_fp32_cpu_offload", false},
            {"llm_int8_has_fp16_weight", false},
            {"llm_int8_skip_modules", nullptr},
            {"llm_int8_threshold", 6.0}};
}

bool stored_in_4bit(const HfWeights& w, const std::string& name) {
    return w.tensors.count(name + ".quant_state.bitsandbytes__nf4") ||
           w.tensors.count(name + ".quant_state.bitsandbytes__fp4") ||
           (w.tensors.count(name) && w.tensors.at(name)->dtype == "U8");
}

bool is_4bit_state(const std::string& name) {
    for (const auto& s : kStateSuffixes)
        if (name.ends_with(s)) return true;
    return false;
}

void check_4bit_weight(const fs::path& dir, const HfWeights& w, const std::string& name, const Shape& shape) {
    check_and_describe(dir, w, name, shape);
}

ops::Quantized4 read_4bit_weight(const fs::path& dir, const HfWeights& w, const std::string& name, const Shape& shape) {
    Stored4 s = check_and_describe(dir, w, name, shape);
    s.q.codes = flat_u8(*w.tensors.at(name));
    if (s.double_quant) {
        s.q.absmax_codes = flat_u8(*w.tensors.at(name + ".absmax"));
        s.q.nested_absmax = flat_f32(*w.tensors.at(name + ".nested_absmax"));
    } else {
        s.q.absmax = flat_f32(*w.tensors.at(name + ".absmax"));
    }
    return s.q.persistent(Device::cpu());
}

std::vector<std::pair<std::string, Tensor>> bnb_4bit_tensors(const std::string& name, const ops::Quantized4& given,
                                                             const std::string& dtype,
                                                             std::vector<std::string>& f32_names) {
    const ops::Quantized4 q = given.to(Device::cpu());
    nlohmann::json state = {{"quant_type", std::string(ops::name_of(q.type))},
                            {"blocksize", q.blocksize},
                            {"dtype", dtype},
                            {"shape", q.shape.dims()}};
    std::vector<std::pair<std::string, Tensor>> out;
    out.emplace_back(name, q.codes.view({q.codes.numel(), 1}));
    const auto& code = kernels::code_of(q.type);
    if (q.double_quant()) {
        out.emplace_back(name + ".absmax", q.absmax_codes);
        out.emplace_back(name + ".quant_map", table(code.data(), 16));
        out.emplace_back(name + ".nested_absmax", q.nested_absmax);
        out.emplace_back(name + ".nested_quant_map", table(kernels::kDynamicMap.data(), 256));
        state.update({{"nested_blocksize", kernels::kNestedBlock}, {"nested_dtype", "float32"},
                      {"nested_offset", q.offset}});
        for (const char* s : {".quant_map", ".nested_absmax", ".nested_quant_map"}) f32_names.push_back(name + s);
    } else {
        out.emplace_back(name + ".absmax", q.absmax);
        out.emplace_back(name + ".quant_map", table(code.data(), 16));
        for (const char* s : {".absmax", ".quant_map"}) f32_names.push_back(name + s);
    }
    out.emplace_back(name + ".quant_state.bitsandbytes__" + std::string(ops::name_of(q.type)), bytes_of(state.dump()));
    return out;
}

}  // namespace levers::models

#include "levers/models/hf_dir.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/core/shape_trace.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "levers/models/bnb_4bit.hpp"
#include "levers/nn/lora.hpp"
#include "levers/nn/quantize.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

namespace levers::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kSingle = "model.safetensors";

// Tensors a checkpoint may carry that are not weights: old Llama checkpoints'
// rotary buffers, and the output projection of a model whose head is tied.
bool ignorable(const std::string& name, const LlamaConfig& c) {
    return name.ends_with(".rotary_emb.inv_freq") || (c.tie_word_embeddings && name == "lm_head.weight");
}

std::string storage_dtype(const std::string& torch_dtype) {
    if (torch_dtype == "float32") return "F32";
    if (torch_dtype == "bfloat16") return "BF16";
    LEVERS_CHECK(torch_dtype == "float16", "dtype \"{}\" cannot be written; give float32, bfloat16 or float16",
                 torch_dtype);
    return "F16";
}

// The shards of an index, each tensor in the file the index names.
void open_index(const fs::path& dir, HfWeights& out) {
    const fs::path index_path = dir / kIndex;
    const auto index = nlohmann::json::parse(read_file(index_path), nullptr, false);
    LEVERS_CHECK(index.is_object() && index.contains("weight_map") && index.at("weight_map").is_object(),
                 "{}: not a safetensors index (a JSON object with a \"weight_map\")", index_path.string());
    std::map<std::string, std::size_t> shard_of;  // file -> position in out.files
    std::map<std::string, int> named;             // file -> how many tensors the index puts there
    for (const auto& [name, file] : index.at("weight_map").items()) {
        LEVERS_CHECK(file.is_string(), "{}: tensor '{}' maps to {}, not a file name", index_path.string(), name,
                     file.dump());
        ++named[file.get<std::string>()];
    }
    out.files.reserve(named.size());
    for (const auto& [file, count] : named) {
        LEVERS_CHECK(fs::is_regular_file(dir / file), "{}: no such file; {} names it for {} tensors",
                     (dir / file).string(), kIndex, count);
        shard_of[file] = out.files.size();
        out.files.push_back(data::SafeTensorsFile::open(dir / file));
    }
    for (const auto& [name, file_json] : index.at("weight_map").items()) {
        const std::string file = file_json.get<std::string>();
        const auto& tensors = out.files[shard_of.at(file)].tensors();
        const auto it = tensors.find(name);
        LEVERS_CHECK(it != tensors.end(), "{}: no tensor '{}', which {} puts there", (dir / file).string(), name,
                     kIndex);
        out.tensors[name] = &it->second;
        out.file_of[name] = file;
    }
}

// The model's weights against the directory's tensors, every one checked before any is read.
void check_tensors(const fs::path& dir, const LlamaConfig& c, const HfWeights& w,
                   const std::vector<std::pair<std::string, Shape>>& expected) {
    const bool quantized = bnb_4bit_config(c, dir / "config.json").has_value();
    std::set<std::string> wanted;
    for (const auto& [name, shape] : expected) {
        wanted.insert(name);
        const auto it = w.tensors.find(name);
        LEVERS_CHECK(it != w.tensors.end(), "{}: no tensor '{}'; a {} of this config.json ({} layers) needs it {}",
                     (dir / (fs::exists(dir / kIndex) ? kIndex : kSingle)).string(), name, c.model_type,
                     c.num_hidden_layers, shape.str());
        if (stored_in_4bit(w, name)) {  // bitsandbytes' codes and state, checked against the shape
            LEVERS_CHECK(quantized, "{}: tensor '{}' is stored in 4 bits, but config.json has no quantization_config "
                         "(bitsandbytes, load_in_4bit)", (dir / w.file_of.at(name)).string(), name);
            check_4bit_weight(dir, w, name, shape);
            continue;
        }
        LEVERS_CHECK(it->second->shape == shape, "{}: tensor '{}' is {}; this config.json makes it {}",
                     (dir / w.file_of.at(name)).string(), name, it->second->shape.str(), shape.str());
    }
    // A 4-bit weight's state belongs to it.
    auto state_of_wanted = [&](const std::string& name) {
        if (!is_4bit_state(name)) return false;
        for (const auto& weight : wanted)
            if (name.starts_with(weight + ".") && stored_in_4bit(w, weight)) return true;
        return false;
    };
    for (const auto& [name, stored] : w.tensors)
        LEVERS_CHECK(wanted.count(name) || ignorable(name, c) || state_of_wanted(name),
                     "{}: tensor '{}' is not a weight of a {} of this config.json ({} layers{}, {})",
                     (dir / w.file_of.at(name)).string(), name, c.model_type, c.num_hidden_layers,
                     c.qk_norm ? ", q/k norms" : "", c.tie_word_embeddings ? "tied embeddings" : "its own lm_head");
}

std::vector<std::pair<std::string, Shape>> expected_of(Llama& model) {
    std::vector<std::pair<std::string, Shape>> out;
    for (const auto& [name, p] : model.weights()) out.emplace_back(name, p->shape());
    return out;
}

}  // namespace

const std::vector<std::string>& tokenizer_files() {
    static const std::vector<std::string> files = {"tokenizer.json",   "tokenizer_config.json", "special_tokens_map.json",
                                                   "generation_config.json", "tokenizer.model", "vocab.json",
                                                   "merges.txt",       "chat_template.jinja"};
    return files;
}

bool is_hf_dir(const fs::path& path) { return fs::is_directory(path) && fs::is_regular_file(path / "config.json"); }

HfWeights open_hf_weights(const fs::path& dir) {
    LEVERS_CHECK(fs::is_directory(dir), "{}: no such directory; give a Hugging Face model directory (config.json "
                 "and model.safetensors)", dir.string());
    HfWeights out;
    if (fs::exists(dir / kIndex)) {
        open_index(dir, out);
        return out;
    }
    LEVERS_CHECK(fs::is_regular_file(dir / kSingle), "{}: no {} and no {}; a Hugging Face model directory holds "
                 "one of them beside config.json", dir.string(), kSingle, kIndex);
    out.files.push_back(data::SafeTensorsFile::open(dir / kSingle));
    for (const auto& [name, stored] : out.files.front().tensors()) {
        out.tensors[name] = &stored;
        out.file_of[name] = kSingle;
    }
    return out;
}

namespace {
// The directory's config.json, read; a missing directory or file named.
LlamaConfig dir_config(const fs::path& dir) {
    LEVERS_CHECK(fs::is_directory(dir), "{}: no such directory; give a Hugging Face model directory (config.json "
                 "and model.safetensors)", dir.string());
    LEVERS_CHECK(fs::is_regular_file(dir / "config.json"), "{}: no config.json; a Hugging Face model directory has "
                 "one beside its safetensors", dir.string());
    return read_llama_config(dir / "config.json");
}

// A directory of config.json without weight files is a model's shape alone, which only a shape trace takes
// (`recipe plan` of a model not downloaded yet): its weights would be neither read nor used.
bool shape_alone(const fs::path& dir) {
    return shape_tracing() && !fs::exists(dir / kIndex) && !fs::exists(dir / kSingle);
}
}  // namespace

LlamaConfig check_hf_dir(const fs::path& dir) {
    const LlamaConfig config = dir_config(dir);
    if (shape_alone(dir)) return config;
    const HfWeights weights = open_hf_weights(dir);
    Llama shapes_only(config);
    check_tensors(dir, config, weights, expected_of(shapes_only));
    return config;
}

std::unique_ptr<Llama> load_hf_model(const fs::path& dir, Device device, DType compute,
                                     const std::function<void(Llama&)>& prepare) {
    const LlamaConfig config = dir_config(dir);
    const bool shape = shape_alone(dir);
    const HfWeights weights = shape ? HfWeights{} : open_hf_weights(dir);
    auto model = std::make_unique<Llama>(config);
    if (!shape) check_tensors(dir, config, weights, expected_of(*model));
    // Saved in 4 bits (bitsandbytes): its Linear weights are held so, as they are stored.
    if (const auto stored = bnb_4bit_config(config, dir / "config.json")) {
        if (shape) nn::hold_linears_in_4bit(*model, *stored);
        for (const auto& [name, p] : model->weights())
            if (!shape && stored_in_4bit(weights, name)) p->hold_in_4bit(*stored);
    }
    if (prepare) prepare(*model);
    model->to(device, compute);
    // One tensor at a time: converted to f32 on the host, then copied into its place (a shape alone: the same
    // steps, traced, on a tensor never filled). A weight held in 4 bits takes its stored codes, or is quantized
    // where the model lives as it is read: the full-precision model is never whole anywhere.
    for (const auto& [name, p] : model->weights()) {
        if (!shape && stored_in_4bit(weights, name)) {
            p->set_quantized(read_4bit_weight(dir, weights, name, p->shape()));
            continue;
        }
        const Tensor host = shape ? Tensor::empty(p->shape(), DType::f32) : weights.tensors.at(name)->to_f32();
        if (p->held_in_4bit())
            p->set_quantized(ops::quantize_4bit(host.to(device), *p->quant_spec()));
        else
            p->value().copy_from(host.dtype() == p->value().dtype() ? host : host.to(p->value().dtype()));
    }
    model->parameters_changed();
    return model;
}

data::BpeTokenizer::Spec hf_tokenizer_tables(const fs::path& dir, std::int64_t vocab) {
    LEVERS_CHECK(fs::is_regular_file(dir / "tokenizer.json"), "{}: no tokenizer.json; the model's text goes through "
                 "its own tokenizer (or give token ids as JSON)", dir.string());
    auto spec = data::BpeTokenizer::read_tokenizer_json(dir / "tokenizer.json");
    LEVERS_CHECK(static_cast<std::int64_t>(spec.token_count()) <= vocab, "{}: tokenizer.json has {} tokens, more than "
                 "the model's vocabulary of {}", dir.string(), spec.token_count(), vocab);
    return spec;
}

std::shared_ptr<data::BpeTokenizer> hf_tokenizer(const fs::path& dir, std::int64_t vocab) {
    return std::make_shared<data::BpeTokenizer>(
        data::BpeTokenizer::built_from(hf_tokenizer_tables(dir, vocab), dir / "tokenizer.json"));
}

void check_hf_tokenizer(const LlamaConfig& config, const fs::path& dir) { hf_tokenizer(dir, config.vocab_size); }

TextCodec hf_codec(const fs::path& dir, std::int64_t vocab) {
    auto tok = hf_tokenizer(dir, vocab);
    return {[tok](const std::string& t) { return tok->encode(t, true); },
            [tok](const std::vector<std::int32_t>& t) { return tok->decode(t); }, tok->name()};
}

namespace {

// The bytes a weight takes in the directory: as `dtype`, or in 4 bits with its state (about: the state's JSON).
std::size_t saved_bytes(const Shape& shape, const std::string& dtype, const std::optional<ops::Quant4Spec>& four) {
    const std::int64_t n = shape.numel();
    if (!four) return data::stored_bytes(n, dtype);
    const std::int64_t blocks = (n + four->blocksize - 1) / four->blocksize;
    const std::int64_t nested = (blocks + kernels::kNestedBlock - 1) / kernels::kNestedBlock;
    return static_cast<std::size_t>((n + 1) / 2 + 64 + 200 +
                                    (four->double_quant ? blocks + 4 * nested + 4 * 256 : 4 * blocks));
}

// A weight's values on the host in f32 (a 4-bit one dequantized).
Tensor host_f32(const nn::Parameter& p) {
    if (p.held_in_4bit()) return ops::dequantize_4bit(*p.quantized(), DType::f32).to(Device::cpu());
    return p.value().to(Device::cpu(), DType::f32).contiguous();
}

}  // namespace

void save_hf_model(const fs::path& dir, Llama& model, const HfSaveOptions& options) {
    LlamaConfig config = model.config();
    if (!options.dtype.empty()) config.torch_dtype = options.dtype;
    const std::string dtype = storage_dtype(config.torch_dtype);
    LEVERS_CHECK(options.max_shard_bytes > 0, "the largest shard must hold at least one byte");
    // The weights bitsandbytes would hold in 4 bits (every Linear's but lm_head's), where asked.
    std::set<const nn::Parameter*> four_bit;
    if (options.quantize)
        for (nn::Linear* l : nn::linear_layers(model))
            if (l->name() != "lm_head") four_bit.insert(&l->weight);
    const auto four_of = [&](const nn::Parameter* p) {
        return four_bit.count(p) ? options.quantize : std::optional<ops::Quant4Spec>();
    };
    // Shards in the order of the weights, each as full as max_shard_bytes allows (at least one weight).
    const auto weights = model.weights();
    std::vector<std::vector<std::size_t>> shards(1);
    std::size_t in_shard = 0, total = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        const std::size_t bytes = saved_bytes(weights[i].second->shape(), dtype, four_of(weights[i].second));
        if (!shards.back().empty() && in_shard + bytes > options.max_shard_bytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back().push_back(i);
        in_shard += bytes;
        total += bytes;
    }
    nlohmann::json config_json = config.to_json();
    config_json.erase("quantization_config");  // the weights are written in full precision, unless:
    if (options.quantize) config_json["quantization_config"] = bnb_quantization_config(*options.quantize, config.torch_dtype);
    data::write_directory(dir, "a model directory", is_hf_dir, [&](const fs::path& partial) {
        nlohmann::json weight_map = nlohmann::json::object();
        for (std::size_t s = 0; s < shards.size(); ++s) {
            const std::string file = shards.size() == 1
                                         ? std::string(kSingle)
                                         : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
            std::vector<std::pair<std::string, Tensor>> tensors;
            std::vector<std::string> f32_names;
            for (std::size_t i : shards[s]) {
                const auto& [name, p] = weights[i];
                if (const auto four = four_of(p)) {
                    const ops::Quantized4 q = p->held_in_4bit() && p->quant_spec()->type == four->type &&
                                                      p->quant_spec()->double_quant == four->double_quant
                                                  ? *p->quantized()
                                                  : ops::quantize_4bit(host_f32(*p), *four);
                    for (auto& t : bnb_4bit_tensors(name, q, config.torch_dtype, f32_names)) {
                        weight_map[t.first] = file;
                        tensors.push_back(std::move(t));
                    }
                    continue;
                }
                tensors.emplace_back(name, host_f32(*p));
                weight_map[name] = file;
            }
            data::write_safetensors(partial / file, tensors, {{"format", "pt"}}, dtype,
                                    std::set<std::string>(f32_names.begin(), f32_names.end()));
        }
        if (shards.size() > 1) {
            const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
            std::ofstream(partial / kIndex) << index.dump(2) << "\n";
        }
        std::ofstream(partial / "config.json") << config_json.dump(2) << "\n";
        if (!options.tokenizer_from.empty())
            for (const std::string& name : tokenizer_files())
                if (fs::is_regular_file(options.tokenizer_from / name))
                    fs::copy_file(options.tokenizer_from / name, partial / name);
    });
}

}  // namespace levers::models

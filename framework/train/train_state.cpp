#include "framework/train/train_state.hpp"

#include "framework/core/error.hpp"

namespace levers::train {

namespace {
constexpr const char* kKind = "levers-train-state";
}

void save_train_state(const std::filesystem::path& path, nlohmann::json metadata, const ParamSet& params,
                      const AdamW& optimizer, const LoopState& loop, const std::vector<nlohmann::json>& data) {
    metadata["kind"] = kKind;
    metadata["loop"] = to_json(loop);
    metadata["adamw_steps"] = optimizer.steps_taken();
    metadata["world_size"] = static_cast<int>(data.size());
    metadata["data"] = data;
    std::vector<NamedTensor> tensors;
    for (std::size_t i = 0; i < params.entries().size(); ++i)
        tensors.push_back({"param/" + params.entries()[i].name, params.param_tensor(static_cast<int>(i))});
    tensors.push_back({"adamw/m", optimizer.first_moment()});
    tensors.push_back({"adamw/v", optimizer.second_moment()});
    write_checkpoint(path, metadata, tensors);
}

TrainState read_train_state(const std::filesystem::path& path) {
    TrainState s;
    s.file = read_checkpoint(path);
    const auto& meta = s.file.metadata;
    const std::string file = path.string();
    LEVERS_CHECK(meta.value("kind", "") == kKind,
                 "{}: not a training checkpoint (it holds {}); --resume takes a checkpoints/step-*.ckpt file or a "
                 "run directory", file, meta.contains("model") ? "a model for sampling" : "something else");
    s.loop = loop_state_from_json(meta.at("loop"), file);
    try {
        s.adamw_steps = meta.at("adamw_steps").get<long>();
        s.world_size = meta.at("world_size").get<int>();
        s.data = meta.at("data").get<std::vector<nlohmann::json>>();
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: incomplete training metadata: {}", file, e.what());
    }
    LEVERS_CHECK(s.world_size >= 1 && static_cast<int>(s.data.size()) == s.world_size,
                 "{}: metadata says {} ranks but holds {} data states", file, s.world_size, s.data.size());
    return s;
}

void load_parameters(const TrainState& state, ParamSet& params, const std::filesystem::path& path) {
    std::size_t saved = 0;
    for (const auto& t : state.file.tensors) saved += t.name.starts_with("param/");
    LEVERS_CHECK(saved == params.entries().size(),
                 "{}: holds {} parameter tensors, this model has {}: a checkpoint of another model", path.string(),
                 saved, params.entries().size());
    for (std::size_t i = 0; i < params.entries().size(); ++i) {
        const auto& e = params.entries()[i];
        Tensor dst = params.param_tensor(static_cast<int>(i));
        const Tensor* src = nullptr;
        for (const auto& t : state.file.tensors)
            if (t.name == "param/" + e.name) src = &t.tensor;
        LEVERS_CHECK(src != nullptr, "{}: has no parameter '{}': a checkpoint of another model", path.string(), e.name);
        LEVERS_CHECK(src->shape() == dst.shape() && src->dtype() == dst.dtype(),
                     "{}: parameter '{}' is {} {}, this model's is {} {}: a checkpoint of another model",
                     path.string(), e.name, name_of(src->dtype()), src->shape().str(), name_of(dst.dtype()),
                     dst.shape().str());
        dst.copy_from(*src);
    }
    params.changed();
}

}  // namespace levers::train

#include "levers/train/train_state.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/zero.hpp"

namespace levers::train {

namespace {
constexpr const char* kKind = "levers-train-state";
constexpr const char* kShardKind = "levers-optimizer-shard";
}

OptimizerState whole_state(const AdamW& optimizer, const ParamSet& params) {
    const std::int64_t n = params.size();
    OptimizerState s{dist::unshard(optimizer.first_moment(), optimizer.shard(), n),
                     dist::unshard(optimizer.second_moment(), optimizer.shard(), n), optimizer.steps_taken()};
    if (const FlatShard* shard = params.sharded_params()) s.masters = dist::unshard(params.params(), *shard, n);
    return s;
}

std::filesystem::path shard_path(const std::filesystem::path& file, int rank, int world) {
    return file.string() + ".shard-" + std::to_string(rank) + "-of-" + std::to_string(world);
}

void save_optimizer_shard(const std::filesystem::path& file, const AdamW& optimizer, const ParamSet& params, int rank,
                          int world) {
    nlohmann::json meta = {{"kind", kShardKind}, {"rank", rank}, {"world_size", world},
                           {"ranges", optimizer.shard().ranges}, {"adamw_steps", optimizer.steps_taken()}};
    std::vector<NamedTensor> tensors = {{"adamw/m", optimizer.first_moment()}, {"adamw/v", optimizer.second_moment()}};
    if (const FlatShard* shard = params.sharded_params()) {
        LEVERS_CHECK(shard->ranges == optimizer.shard().ranges, "the master values' shard is not the optimizer's");
        tensors.push_back({"master", params.params()});
    }
    write_checkpoint(shard_path(file, rank, world), meta, tensors);
}

namespace {
// The whole moments of `n` elements from the `world` shard files beside `file`.
void read_shards(TrainState& s, const std::filesystem::path& file, int world, std::int64_t n) {
    Tensor m, v, masters;
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    for (int r = 0; r < world; ++r) {
        const auto path = shard_path(file, r, world);
        LEVERS_CHECK(std::filesystem::exists(path), "{}: its optimizer shard {} is missing (a checkpoint written by "
                     "{} ranks keeps one file per rank beside it)", file.string(), path.string(), world);
        const Checkpoint shard = read_checkpoint(path);
        std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
        try {
            LEVERS_CHECK(shard.metadata.at("kind") == kShardKind && shard.metadata.at("rank") == r &&
                             shard.metadata.at("world_size") == world,
                         "{}: not shard {} of {} of {}", path.string(), r, world, file.string());
            ranges = shard.metadata.at("ranges").get<decltype(ranges)>();
        } catch (const nlohmann::json::exception& e) {
            LEVERS_FAIL("{}: incomplete shard metadata: {}", path.string(), e.what());
        }
        const Tensor &sm = shard.at("adamw/m"), &sv = shard.at("adamw/v");
        if (!m.defined()) {
            m = Tensor::zeros({n}, sm.dtype());
            v = Tensor::zeros({n}, sv.dtype());
        }
        const FlatShard held{ranges};
        for (const auto& [b, e] : ranges) {
            LEVERS_CHECK(0 <= b && b <= e && e <= n, "{}: range [{}, {}) is outside the {} elements", path.string(),
                         b, e, n);
            for (std::int64_t i = b; i < e; ++i) seen[static_cast<std::size_t>(i)] += 1;
        }
        LEVERS_CHECK(held.size() == sm.numel() && held.size() == sv.numel(),
                     "{}: its ranges hold {} elements, its moments {}", path.string(), held.size(), sm.numel());
        shard_to_whole(held, sm, m);
        shard_to_whole(held, sv, v);
        if (s.file.metadata.value("param_shards", false)) {
            const Tensor& sp = shard.at("master");
            LEVERS_CHECK(sp.numel() == held.size(), "{}: its ranges hold {} elements, its master values {}",
                         path.string(), held.size(), sp.numel());
            if (!masters.defined()) masters = Tensor::zeros({n}, sp.dtype());
            shard_to_whole(held, sp, masters);
        }
    }
    for (std::int64_t i = 0; i < n; ++i)
        LEVERS_CHECK(seen[static_cast<std::size_t>(i)] == 1, "{}: its {} shards hold element {} of the optimizer's "
                     "state {} times", file.string(), world, i, static_cast<int>(seen[static_cast<std::size_t>(i)]));
    s.file.tensors.push_back({"adamw/m", m});
    s.file.tensors.push_back({"adamw/v", v});
    s.masters = masters;
}
}  // namespace

void save_train_state(const std::filesystem::path& path, nlohmann::json metadata, const ParamSet& params,
                      const OptimizerState& optimizer, const LoopState& loop, const std::vector<nlohmann::json>& data) {
    metadata["kind"] = kKind;
    metadata["loop"] = to_json(loop);
    metadata["adamw_steps"] = optimizer.steps;
    metadata["world_size"] = static_cast<int>(data.size());
    metadata["data"] = data;
    std::vector<NamedTensor> tensors;
    if (optimizer.shards > 0 && params.sharded_params()) {  // the shard files hold the master values
        metadata["param_shards"] = true;
        nlohmann::json entries = nlohmann::json::array();
        for (const auto& e : params.entries()) entries.push_back({e.name, e.shape.dims()});
        metadata["params"] = entries;
    } else {
        for (std::size_t i = 0; i < params.entries().size(); ++i) {
            const auto& e = params.entries()[i];
            tensors.push_back({"param/" + e.name, optimizer.masters.defined()
                                                      ? optimizer.masters.slice(e.offset, e.offset + e.shape.numel()).view(e.shape)
                                                      : params.param_tensor(static_cast<int>(i))});
        }
    }
    if (optimizer.shards > 0) {
        metadata["adamw_shards"] = optimizer.shards;
        metadata["adamw_elements"] = params.size();
    } else {
        tensors.push_back({"adamw/m", optimizer.m});
        tensors.push_back({"adamw/v", optimizer.v});
    }
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
        s.grad_accum = meta.value("grad_accum", 0L);
        s.data = meta.at("data").get<std::vector<nlohmann::json>>();
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: incomplete training metadata: {}", file, e.what());
    }
    LEVERS_CHECK(s.world_size >= 1 && static_cast<int>(s.data.size()) == s.world_size,
                 "{}: metadata says {} ranks but holds {} data states", file, s.world_size, s.data.size());
    if (const int shards = meta.value("adamw_shards", 0); shards > 0)
        read_shards(s, path, shards, meta.value("adamw_elements", std::int64_t{0}));
    return s;
}

long grad_accum_on(const TrainState& state, int world, const std::filesystem::path& path) {
    if (state.grad_accum <= 0) return 0;
    const long global = state.grad_accum * state.world_size;
    if (global % world == 0) return global / world;
    std::string fits;
    for (long w = 1; w <= global; ++w)
        if (global % w == 0) fits += (fits.empty() ? "" : ", ") + std::to_string(w);
    LEVERS_FAIL("--resume {}: the run took {} micro-batches per step ({} rank{} x grad_accum {}), which {} ranks "
                "cannot share evenly; resume it with --gpus {}", path.string(), global, state.world_size,
                state.world_size == 1 ? "" : "s", state.grad_accum, world, fits);
}

void load_parameters(const TrainState& state, ParamSet& params, const std::filesystem::path& path) {
    if (state.masters.defined()) {  // written sharded: the flat values, checked against the entries recorded
        std::vector<std::pair<std::string, std::vector<std::int64_t>>> saved;
        try {
            saved = state.file.metadata.at("params").get<decltype(saved)>();
        } catch (const nlohmann::json::exception& e) {
            LEVERS_FAIL("{}: incomplete parameter metadata: {}", path.string(), e.what());
        }
        LEVERS_CHECK(saved.size() == params.entries().size(),
                     "{}: holds {} parameter tensors, this model has {}: a checkpoint of another model", path.string(),
                     saved.size(), params.entries().size());
        for (std::size_t i = 0; i < saved.size(); ++i) {
            const auto& e = params.entries()[i];
            LEVERS_CHECK(saved[i].first == e.name && saved[i].second == e.shape.dims(),
                         "{}: parameter {} is '{}' {}, this model's is '{}' {}: a checkpoint of another model",
                         path.string(), i, saved[i].first, Shape(saved[i].second).str(), e.name, e.shape.str());
        }
        LEVERS_CHECK(state.masters.numel() == params.size() && state.masters.dtype() == params.dtype(),
                     "{}: {} {} master values, this model keeps {} {}", path.string(), state.masters.numel(),
                     name_of(state.masters.dtype()), params.size(), name_of(params.dtype()));
        params.params().copy_from(state.masters);
        params.changed();
        return;
    }
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

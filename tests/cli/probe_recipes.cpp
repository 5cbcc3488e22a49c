// A user's own binary (levers::main plus its recipes) that the launcher tests
// run with --gpus N: collectives, the store and dist::wrap, each rank checking
// its own answers, rank 0 reporting whether every rank agreed.
// tests/tiny_llama.hpp reaches doctest's header; this binary is no test runner.
#define DOCTEST_CONFIG_DISABLE
#include "levers/app/cli.hpp"
#include "levers/core/params.hpp"
#include "levers/core/rng.hpp"
#include "levers/core/threads.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/data_parallel.hpp"
#include "levers/distributed/sample_means.hpp"
#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/store.hpp"
#include "levers/nn/nn.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/models/mlp.hpp"
#include "tests/tiny_llama.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

using namespace levers;
using levers::dist::ReduceOp;

namespace {

// 1 if every rank's `ok` holds (collective).
bool all_ok(bool ok) { return dist::all_reduce_mean(ok ? 1.0 : 0.0) == 1.0; }

double value(int rank, std::int64_t i) { return rank * 1000 + i % 997; }

Result collectives(const Config&) {
    // With --gpus 1 the recipe runs in place with no group: make a group of one
    // in private memory, so the backend's world-of-one paths run too.
    std::unique_ptr<void, decltype(&std::free)> solo(nullptr, &std::free);
    std::unique_ptr<dist::ShmBackend> own;
    dist::Backend* group = dist::backend();
    if (!group) {
        const std::size_t bytes = dist::ShmBackend::segment_bytes(1, std::size_t{2} << 20);
        solo.reset(std::aligned_alloc(64, bytes));
        dist::ShmBackend::initialize(solo.get(), bytes, 1, std::size_t{2} << 20);
        own = std::make_unique<dist::ShmBackend>(solo.get(), bytes, 0, std::chrono::seconds(10));
        group = own.get();
    }
    auto& b = *group;
    const int world = dist::world_size(), rank = dist::rank();
    bool ok = true;
    for (std::int64_t n : {0L, 1L, 3L, 1000L, (2L << 20) / 8 + 5}) {  // the last spans two 2 MiB slots
        std::vector<double> x(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) x[i] = value(rank, i);
        b.all_reduce(x.data(), n, ReduceOp::sum);
        for (std::int64_t i = 0; i < n; ++i) {
            double expect = 0;
            for (int r = 0; r < world; ++r) expect += value(r, i);
            ok &= x[i] == expect;
        }
        std::vector<float> in(static_cast<std::size_t>(n)), gathered(static_cast<std::size_t>(n * world));
        for (std::int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(value(rank, i));
        b.all_gather(gathered.data(), in.data(), n);
        for (int r = 0; r < world; ++r)
            for (std::int64_t i = 0; i < n; ++i) ok &= gathered[r * n + i] == static_cast<float>(value(r, i));
        auto [lo, hi] = dist::Backend::chunk(n, world, rank);
        std::vector<double> src(static_cast<std::size_t>(n)), part(static_cast<std::size_t>(hi - lo));
        for (std::int64_t i = 0; i < n; ++i) src[i] = value(rank, i);
        b.reduce_scatter(part.data(), src.data(), n, ReduceOp::mean);
        for (std::int64_t i = lo; i < hi; ++i) {
            double expect = 0;
            for (int r = 0; r < world; ++r) expect += value(r, i);
            ok &= part[i - lo] == expect / world;
        }
        std::vector<double> root(static_cast<std::size_t>(n), rank == world - 1 ? 7.0 : 0.0);
        b.broadcast(root.data(), root.size() * sizeof(double), world - 1);
        for (double v : root) ok &= v == 7.0;
    }
    // shard(): every row once, in rank order.
    std::vector<int> rows(11);
    for (int i = 0; i < 11; ++i) rows[i] = i;
    const auto mine = dist::shard(rows);
    auto [lo, hi] = dist::Backend::chunk(11, dist::world_size(), dist::rank());
    ok &= static_cast<std::int64_t>(mine.size()) == hi - lo && (mine.empty() || mine.front() == lo);
    std::vector<double> total = {static_cast<double>(mine.size())};
    dist::all_reduce_sum(total);
    ok &= total[0] == 11;
    return {{"ok", all_ok(ok)}, {"ranks", world}};
}

// How levers read each rank's place from its launcher's variables: [rank,
// world, local rank, local world, CPU threads] of every rank, in rank order.
Result rank_env(const Config&) {
    std::vector<double> mine = {static_cast<double>(dist::rank()), static_cast<double>(dist::world_size()),
                                static_cast<double>(dist::local_rank()), static_cast<double>(dist::local_world_size()),
                                static_cast<double>(levers::threads())};
    std::vector<double> all(mine.size() * static_cast<std::size_t>(dist::world_size()));
    if (dist::backend())
        dist::backend()->all_gather(all.data(), mine.data(), static_cast<std::int64_t>(mine.size()));
    else
        all = mine;
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < all.size() / mine.size(); ++r)
        ranks.push_back(std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
                                            all.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size())));
    return {{"ranks", ranks}};
}

// File descriptors a rank holds beyond stdin, stdout and stderr, summed over
// ranks: a rank must not inherit another rank's pipe or the launcher's files.
Result fds(const Config&) {
    std::vector<std::string> extra;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::stoi(e.path().filename().string());
        std::error_code ec;
        const auto target = std::filesystem::read_symlink(e.path(), ec).string();
        if (fd > 2 && target.find("/proc/") == std::string::npos) extra.push_back(target);  // not the listing itself
    }
    std::vector<double> count = {static_cast<double>(extra.size())};
    dist::all_reduce_sum(count);
    return {{"extra_fds", count[0]}, {"rank0_extra", extra}};
}

// What CUDA would see of the GPU order in every rank (all the same, or "mixed").
Result gpu_order(const Config&) {
    const char* order = std::getenv("CUDA_DEVICE_ORDER");
    const std::vector<std::string> all = dist::all_gather_text(order ? order : "(unset)");
    const bool same = std::all_of(all.begin(), all.end(), [&](const std::string& o) { return o == all.front(); });
    return {{"cuda_device_order", same ? all.front() : std::string("mixed")}};
}

Result store(const Config&) {
    dist::Store* s = dist::backend()->store();
    LEVERS_CHECK(s != nullptr, "the store recipe runs on a group with a store (shared memory)");
    const int rank = dist::rank(), world = dist::world_size();
    s->set("rank" + std::to_string(rank), "hello from " + std::to_string(rank));
    const std::int64_t count = s->add("arrived", 1);
    bool ok = count >= 1 && count <= world;
    for (int r = 0; r < world; ++r) ok &= s->get("rank" + std::to_string(r)) == "hello from " + std::to_string(r);
    dist::barrier();
    ok &= s->get("arrived") == std::to_string(world);
    return {{"ok", all_ok(ok)}, {"ranks", world}};
}

const Param<long> global_rows{"global_batch", 24, "rows per step over all ranks", at_least(1)};
const Param<long> accumulation{"grad_accum", 1, "micro-batches per step", at_least(1)};
const Param<long> bucket_bytes{"bucket_bytes", 256, "gradient bucket size", at_least(4)};

// An MLP on synthetic data with the recipe owning its loop through dist::wrap:
// one global batch per step, each rank training on its rows.
Result wrapped(const Config& cfg) {
    models::Mlp model({.inputs = 8, .hidden = {16}, .classes = 3}, 5);
    auto ddp = dist::wrap(model, cfg[bucket_bytes]);
    train::AdamW adamw(model.params(), {.lr = 1e-2});
    const long global = cfg[global_rows], accum = cfg[accumulation];
    const long per_rank = global / dist::world_size() / accum;
    Rng rng(9);
    std::vector<float> x(static_cast<std::size_t>(per_rank * 8));
    std::vector<std::int32_t> y(static_cast<std::size_t>(per_rank));
    double loss = 0;
    for (int step = 0; step < 20; ++step) {
        model.params().zero_grad();
        loss = 0;
        for (long micro = 0; micro < accum; ++micro) {
            for (long row = 0; row < global / accum; ++row) {  // the whole micro-batch, every rank alike
                const long mine = row - dist::rank() * per_rank;
                for (int j = 0; j < 8; ++j) {
                    const float v = static_cast<float>(rng.normal());
                    if (mine >= 0 && mine < per_rank) x[static_cast<std::size_t>(mine * 8 + j)] = v;
                }
                const auto label = static_cast<std::int32_t>(rng.below(3));
                if (mine >= 0 && mine < per_rank) y[static_cast<std::size_t>(mine)] = label;
            }
            loss += ddp.step(micro + 1 == accum,
                             [&] {
                                 const Tensor l = model.loss(Tensor::from(x, {per_rank, 8}), Tensor::from(y, {per_rank}));
                                 l.backward();
                                 return l.item();
                             }) /
                    static_cast<double>(accum);
        }
        if (accum > 1)
            for (std::int64_t i = 0; i < model.params().size(); ++i) model.params().grads().data<float>()[i] /= accum;
        adamw.step(1e-2);
    }
    double norm = 0;
    for (std::int64_t i = 0; i < model.params().size(); ++i)
        norm += double(model.params().params().data<float>()[i]) * model.params().params().data<float>()[i];
    return {{"loss", dist::all_reduce_mean(loss)}, {"param_norm", norm}};
}

const Param<double> seconds{"seconds", 0.2, "how long to hold the GPU", at_least(0)};
const Param<long> returned{"value", 1, "returned, and doubled"};
const Param<bool> fail{"fail", false, "fail instead"};

// Holds its GPU for a while: for tests of the slot ledger and of sweeps.
Result hold(const Config& cfg) {
    LEVERS_CHECK(!cfg[fail], "asked to fail (value {})", cfg[returned]);
    fmt::print("holding for {} s\n", cfg[seconds]);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg[seconds]));
    return {{"returned", cfg[returned]}, {"double", 2 * cfg[returned]}};
}

// Seven evaluation samples valued 1..7 over however many ranks, and a metric
// that never improves: the mean must be exactly 4 over exactly 7 samples, and
// early stopping must end every rank at the same step.
struct Points {
    std::vector<float> x = {-1, -0.5f, 0.5f, 1};
    std::vector<std::int32_t> y = {0, 0, 1, 1};
};

Metrics uneven_eval(models::Mlp&, Points&) {
    auto [lo, hi] = dist::Backend::chunk(7, dist::world_size(), dist::rank());
    dist::SampleMeans means({"mean_value"});
    for (std::int64_t i = lo; i < hi; ++i) means.add("mean_value", static_cast<double>(i + 1), 1);
    std::vector<double> counted = {means.count("mean_value")};
    dist::all_reduce_sum(counted);
    Metrics m = means.means();
    m["samples"] = counted[0];
    m["plateau"] = 1.0;
    return m;
}

// A user's own op with a CPU kernel only (what the README's "Adding an op"
// describes): y = x², dy/dx = 2x, its calls named in structs of its own.
struct SquareCall : KernelCallBase {
    static constexpr const char* kName = "test_square";
    TensorArg out, in;
};
struct SquareBackwardCall : KernelCallBase {
    static constexpr const char* kName = "test_square_backward";
    TensorArg d_in, d_out, in;
};
template <class T> void square_kernel(const SquareCall& c) {
    const T* x = c.in.as<T>();
    T* y = c.out.as<T>();
    for (std::int64_t i = 0; i < c.in.numel(); ++i) y[i] = x[i] * x[i];
}
template <class T> void square_grad_kernel(const SquareBackwardCall& c) {
    for (std::int64_t i = 0; i < c.d_out.numel(); ++i) c.d_in.as<T>()[i] = 2 * c.in.as<T>()[i] * c.d_out.as<T>()[i];
}
LEVERS_KERNEL(SquareCall, cpu, f32, square_kernel<float>);
LEVERS_KERNEL(SquareBackwardCall, cpu, f32, square_grad_kernel<float>);

Tensor square(const Tensor& input) {
    const Tensor x = input.contiguous();
    Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
    SquareCall call{.out = ops::arg(y), .in = ops::arg(x)};
    ops::run(x, call);
    struct Saved {
        autograd::SavedTensor x;
    };
    if (auto* s = autograd::record<Saved>(
            "test_square",
            [](autograd::Backward& g, const Saved& s) {
                SquareBackwardCall call{.d_in = ops::arg(g.write_grad(0)), .d_out = ops::arg(g.grad_out()),
                                        .in = ops::arg(s.x)};
                ops::run(s.x.get(), call);
            },
            {&x}, {&y}))
        s->x = x;
    return y;
}

struct Squares : nn::Layer {
    nn::Linear a{*this, "a", 1, 8}, b{*this, "b", 8, 2};
    Squares() { initialize(1); }
    Tensor forward(const Tensor& x) override { return b(square(a(on_device(x)))); }
};

// A tiny model of a Llama-family type over the tests' small tokenizer, saved as a Hugging Face directory
// (for sft on the emulated GPU): the sizes of tiny_of_type, heads of 64 where the type has its own.
const Param<std::string> model_type{"model_type", "gemma3_text", "the config's model_type"};
const Param<std::string> model_dir{"dir", "tiny_model", "where the directory goes"};
const Param<std::string> tokenizer_dir{"tokenizer", "", "the tokenizer files' directory (tests/fixtures/tiny_tokenizer)"};

Result tiny_model(const Config& cfg) {
    const models::LlamaConfig c = testing::tiny_of_type(
        cfg[model_type], {.vocab = testing::kTinyTokenizerVocab, .hidden = 64, .intermediate = 96, .layers = 2,
                          .heads = 1, .kv_heads = 1, .context = 64});
    testing::save_tiny_llama(cfg[model_dir], c, 5, cfg[tokenizer_dir]);
    return {{"parameters", c.parameter_count()}};
}

}  // namespace

LEVERS_RECIPE(tiny_model) {
    return levers::recipe("tiny_model")
        .describe("saves a tiny model of a Llama-family type with the tests' tokenizer")
        .params(model_type, model_dir, tokenizer_dir)
        .run(tiny_model);
}

// A model whose op has no GPU kernel: `--device auto` keeps it on the CPU.
LEVERS_RECIPE(cpu_op) {
    return levers::recipe("cpu_op")
        .describe("a model using an op with a CPU kernel only")
        .training({.steps = 20, .lr = 0.05, .log_every = 10})
        .model([](const Config&) { return std::make_unique<Squares>(); })
        .data([](const Config&) { return Points{}; })
        .step([](Squares& m, Points& p, const StepInfo&) {
            const Tensor loss = ops::cross_entropy(m(Tensor::from(p.x, {4, 1})), Tensor::from(p.y, {4}));
            loss.backward();
            return MicroResult{loss.item(), 4};
        });
}

LEVERS_RECIPE(uneven) {
    return levers::recipe("uneven")
        .describe("exact metrics over 7 samples on any rank count, and early stopping on a plateau")
        .training({.steps = 100, .lr = 0.01, .log_every = 1000, .eval_every = 2})
        .model([](const Config&) {
            return std::make_unique<models::Mlp>(models::MlpConfig{.inputs = 1, .hidden = {4}, .classes = 2}, 1);
        })
        .data([](const Config&) { return Points{}; })
        .step([](models::Mlp& m, Points& p, const StepInfo&) {
            const Tensor loss = m.loss(Tensor::from(p.x, {4, 1}), Tensor::from(p.y, {4}));
            loss.backward();
            return MicroResult{loss.item(), 4};
        })
        .evaluate(uneven_eval)
        .early_stop("plateau", 2);
}

LEVERS_RECIPE(hold) {
    return levers::recipe("hold")
        .describe("sleeps while holding its GPU, then returns its value doubled")
        .params(seconds, returned, fail)
        .run(hold);
}

LEVERS_RECIPE(collectives) { return levers::recipe("collectives").describe("checks every collective").run(collectives); }
LEVERS_RECIPE(rank_env) {
    return levers::recipe("rank_env").describe("reports how levers read each rank's place").run(rank_env);
}
LEVERS_RECIPE(fds) { return levers::recipe("fds").describe("counts the files each rank holds open").run(fds); }
LEVERS_RECIPE(gpu_order) {
    return levers::recipe("gpu_order").describe("reports CUDA_DEVICE_ORDER as each rank sees it").run(gpu_order);
}
LEVERS_RECIPE(store) { return levers::recipe("store").describe("checks the shared-memory store").run(store); }
LEVERS_RECIPE(wrapped) {
    return levers::recipe("wrapped")
        .describe("an MLP trained through dist::wrap")
        .params(global_rows, accumulation, bucket_bytes)
        .run(wrapped);
}

int main(int argc, char** argv) { return levers::main(argc, argv); }

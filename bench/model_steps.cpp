// Training steps of two models written from the general ops, for
// bench/general_ops.sh to set against the same models in PyTorch: the
// user's small CNN (examples/user_project/small_cnn.hpp: forward, backward and AdamW on
// batches of real Fashion-MNIST images, --images, each step the next 64 of the
// training set, as the peer takes them) and the user's Llama-style block
// (examples/user_project/llama_block.hpp: forward and backward); and
// levers' own Llama-family decoder (levers/models/llama.hpp, its fused kernels) for
// bench/llama_step.sh: a whole training step (forward, loss over the
// vocabulary, backward, AdamW; on a real text's ids, --ids); and a DPO step of that decoder for
// bench/dpo_step.sh (a frozen reference scores two pairs of answers, the
// policy scores them with gradients, the sigmoid loss, backward, AdamW),
// on token ids of a real text (--ids). One JSON object: the median step.
//
//   bench_model_steps --model cnn|llama_block|llama|dpo [--threads N] [--steps N] [--ids FILE.json] [--images DIR]
#include "examples/user_project/llama_block.hpp"
#include "examples/user_project/small_cnn.hpp"
#include "levers/core/rng.hpp"
#include "levers/core/storage_pool.hpp"
#include "levers/core/threads.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/idx.hpp"
#include "levers/data/preference_data.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/train/preference_loss.hpp"
#include "bench/llama_shape.hpp"
#include "levers/models/llama.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <functional>

using namespace levers;

namespace {

Tensor normals(Shape shape, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(static_cast<std::size_t>(shape.numel()));
    for (float& x : v) x = static_cast<float>(rng.normal());
    return Tensor::from(v, shape);
}

double median_ms(int warmup, int steps, const std::function<void()>& step) {
    std::vector<double> ms;
    for (int i = 0; i < warmup + steps; ++i) {
        const auto start = std::chrono::steady_clock::now();
        step();
        if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app("Training steps of models written from the general ops", "bench_model_steps");
    std::string model = "cnn", ids_file, images_dir;
    int threads = 1, steps = 10, batch = 0;
    app.add_option("--model", model, "cnn, llama_block, llama or dpo")
        ->check(CLI::IsMember({"cnn", "llama_block", "llama", "dpo"}));
    app.add_option("--ids", ids_file, "llama, dpo: a JSON array of token ids (a text as recipe tokenize writes it)");
    app.add_option("--images", images_dir, "cnn: Fashion-MNIST's IDX files (default: Debian's dataset-fashion-mnist)");
    bool random_images = false;
    app.add_flag("--random-images", random_images, "cnn: normal(0, 1) images in place of the real ones (the input dependence check)");
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed steps (the median is reported)")->check(CLI::PositiveNumber);
    app.add_option("--batch", batch, "batch (default: 64 images; 4 sequences of 256 tokens; llama: 2 of 512)");
    CLI11_PARSE(app, argc, argv);
    set_threads(threads);
    nlohmann::json row = {{"impl", "levers"}, {"model", model}, {"threads", threads}};
    if (model == "cnn") {
        const std::int64_t n = batch > 0 ? batch : 64;
        user::SmallCnn cnn(16, 1);  // 16 and 32 channels
        train::AdamW adamw(cnn.params(), {.lr = 1e-3});
        // Step k's batch: training images [k n, (k + 1) n), taken before the clock runs (the peer's too).
        const std::filesystem::path dir = images_dir.empty() ? data::fashion_mnist_dir() : std::filesystem::path(images_dir);
        const data::ImageSet train = data::map_idx_images(dir / "train-images-idx3-ubyte.gz",
                                                          dir / "train-labels-idx1-ubyte.gz", 10);
        std::vector<std::pair<Tensor, Tensor>> batches(static_cast<std::size_t>(3 + steps));
        for (std::size_t k = 0; k < batches.size(); ++k) {
            auto& [x, y] = batches[k];
            train.gather_range(static_cast<std::int64_t>(k) * n % (train.count() - n + 1), n, x, y);
            x = random_images ? normals({n, 1, 28, 28}, 100 + k) : x.reshape({n, 1, 28, 28});
        }
        std::size_t next = 0;
        double loss = 0;
        const double ms = median_ms(3, steps, [&] {
            const auto& [x, y] = batches[next++];
            cnn.params().zero_grad();
            const Tensor l = ops::cross_entropy(cnn(x), y);
            l.backward();
            adamw.step(1e-3);
            loss = l.item();
        });
        row.update({{"batch", n}, {"median_step_ms", ms}, {"per_second", static_cast<double>(n) / ms * 1000}, {"unit", "images"}, {"final_loss", loss}});
    } else if (model == "llama") {
        const models::LlamaConfig c = bench::llama_shape(512);
        const std::int64_t b = batch > 0 ? batch : 2, t = 512;
        models::Llama llama(c, 1);
        train::AdamW adamw(llama.params(), {.lr = 1e-4});
        // Row r: the text's ids [r (t + 1), (r + 1)(t + 1)) (--ids: real tokens, as the peer takes them), or
        // without --ids a synthetic sequence (the input dependence check).
        std::vector<std::int32_t> ids(static_cast<std::size_t>(b * (t + 1)));
        if (!ids_file.empty()) {
            const auto text = nlohmann::json::parse(read_file(ids_file)).get<std::vector<std::int32_t>>();
            LEVERS_CHECK(text.size() >= ids.size(), "--ids: {} ids, fewer than {}", text.size(), ids.size());
            std::copy(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(ids.size()), ids.begin());
        } else {
            for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 13) % 32000);
        }
        std::vector<std::int32_t> in, out;
        for (std::int64_t r = 0; r < b; ++r) {
            in.insert(in.end(), ids.begin() + r * (t + 1), ids.begin() + r * (t + 1) + t);
            out.insert(out.end(), ids.begin() + r * (t + 1) + 1, ids.begin() + (r + 1) * (t + 1));
        }
        const Tensor tokens = Tensor::from(in, {b, t}), targets = Tensor::from(out, {b, t});
        double loss = 0;
        const double ms = median_ms(2, steps, [&] {
            llama.params().zero_grad();
            const Tensor l = llama.loss(tokens, targets);
            l.backward();
            adamw.step(1e-4);
            loss = l.item();
        });
        row.update({{"batch", b}, {"tokens", b * t}, {"median_step_ms", ms}, {"per_second", static_cast<double>(b * t) / ms * 1000},
                    {"unit", "tokens"}, {"final_loss", loss}, {"parameters", llama.params().size()},
                    {"inputs", ids_file.empty() ? "synthetic" : "text"},
                    {"activations_mb", static_cast<double>(cpu_pool().stats().peak) / (1 << 20)}});
    } else if (model == "dpo") {
        // Pair k: a prompt of 256 ids of the text, then 257 ids of what follows it (chosen) or of a stretch
        // further on (rejected): four sequences of 512 positions, each its own row, the prompt not scored.
        const auto text = nlohmann::json::parse(read_file(ids_file)).get<std::vector<std::int32_t>>();
        const std::int64_t pairs = batch > 0 ? batch : 2, prompt = 256, answer = 257, t = prompt + answer - 1;
        LEVERS_CHECK(static_cast<std::int64_t>(text.size()) >= pairs * 1024, "--ids: {} ids, fewer than {}", text.size(),
                     pairs * 1024);
        std::vector<data::PreferencePair> list;
        for (std::int64_t k = 0; k < pairs; ++k) {
            const auto at = text.begin() + k * 1024;
            const auto sequence = [&](std::int64_t from) {
                data::SftExample e;
                e.ids.assign(at, at + prompt);
                e.ids.insert(e.ids.end(), at + from, at + from + answer);
                e.learned.assign(static_cast<std::size_t>(prompt), 0);
                e.learned.resize(e.ids.size(), 1);
                return e;
            };
            list.push_back({sequence(prompt), sequence(prompt + 400), prompt});
        }
        const data::PreferenceRows rows = data::make_preference_rows(list, t, false);
        std::vector<std::int64_t> all;
        for (std::int64_t p = 0; p < rows.packs(); ++p) all.push_back(p);
        const data::PreferenceBatch b = data::packs_at(rows, all);
        const models::LlamaConfig c = bench::llama_shape(t);
        models::Llama policy(c, 1), reference(c, 1);
        train::AdamW adamw(policy.params(), {.lr = 1e-4});
        const auto score = [&](models::Llama& m) { return train::pair_logps(m.token_logprobs(b.rows.tokens, b.rows.targets), b); };
        double loss = 0;
        const double ms = median_ms(2, steps, [&] {
            policy.params().zero_grad();
            train::PairLogps ref;
            {
                autograd::InferenceMode inference;
                ref = score(reference);
            }
            const Tensor l = train::preference_loss(score(policy), &ref, {.beta = 0.1}).loss;
            l.backward();
            adamw.step(1e-4);
            loss = l.item();
        });
        const std::int64_t tokens = 2 * pairs * t;
        row.update({{"batch", pairs}, {"tokens", tokens}, {"median_step_ms", ms},
                    {"per_second", static_cast<double>(tokens) / ms * 1000}, {"unit", "tokens"}, {"final_loss", loss},
                    {"parameters", policy.params().size()}});
    } else {
        // 8 query heads of 64 over 2 key-value heads, Llama's 8/3 MLP width (a multiple of 32).
        const user::LlamaBlockConfig c{.dim = 512, .heads = 8, .kv_heads = 2, .hidden = 1376};
        const std::int64_t b = batch > 0 ? batch : 4, t = 256;
        user::LlamaBlock block(c, 1);
        Tensor x = normals({b, t, c.dim}, 3).requires_grad_();
        const Tensor probe = normals({b, t, c.dim}, 4);
        const double ms = median_ms(3, steps, [&] {
            block.params().zero_grad();
            ops::sum(block(x) * probe).backward();
        });
        row.update({{"batch", b}, {"tokens", b * t}, {"median_step_ms", ms}, {"per_second", static_cast<double>(b * t) / ms * 1000},
                    {"unit", "tokens"}, {"activations_mb", static_cast<double>(cpu_pool().stats().peak) / (1 << 20)}});
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    row["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024;
    fmt::print("{}\n", row.dump());
    return 0;
}

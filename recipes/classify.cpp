// classify: an MLP learns Fashion-MNIST (Debian's dataset-fashion-mnist);
// 55,000 images train, 5,000 validate during training, the 10,000 test images
// give the final accuracy.
#include "framework/core/rng.hpp"
#include "framework/data/idx.hpp"
#include "framework/dist/context.hpp"
#include "framework/recipe/loop_params.hpp"
#include "framework/recipe/recipe.hpp"
#include "framework/train/loop.hpp"
#include "models/mlp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace {

using namespace levers;

struct Accuracy {
    double loss = 0, accuracy = 0;
};

// Collective: each rank scores its contiguous share of the images; sums are
// combined, so every image counts exactly once whatever the rank count.
Accuracy evaluate(models::Mlp<float>& model, const data::ImageDataset& ds, long batch) {
    auto [lo, hi] = dist::ShmBackend::chunk(ds.count, dist::world_size(), dist::rank());
    std::vector<double> sums = {0, 0};  // loss total, correct
    for (std::int64_t start = lo; start < hi; start += batch) {
        const std::int64_t n = std::min<std::int64_t>(batch, hi - start);
        sums[0] += model.forward(ds.images.data() + start * ds.pixels, ds.labels.data() + start, n) *
                   static_cast<double>(n);
        for (std::int64_t i = 0; i < n; ++i) {
            const float* row = model.logits() + i * ds.classes;
            auto best = std::max_element(row, row + ds.classes) - row;
            sums[1] += best == ds.labels[static_cast<std::size_t>(start + i)];
        }
    }
    dist::all_reduce_sum(sums);
    return {sums[0] / static_cast<double>(ds.count), sums[1] / static_cast<double>(ds.count)};
}

Result classify(const Config& cfg) {
    const auto dir = cfg.get<std::string>("data").empty() ? data::fashion_mnist_dir()
                                                           : std::filesystem::path(cfg.get<std::string>("data"));
    const auto all = data::load_idx_dataset(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 10);
    const auto test = data::load_idx_dataset(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10);
    const std::int64_t held_out = 5000;
    const auto train_set = all.slice(0, all.count - held_out), val_set = all.slice(all.count - held_out, all.count);

    std::vector<long> hidden_long = cfg.get<std::vector<long>>("hidden");
    models::MlpConfig shape{.inputs = static_cast<int>(all.pixels),
                            .hidden = std::vector<int>(hidden_long.begin(), hidden_long.end()),
                            .classes = 10};
    const auto seed = static_cast<std::uint64_t>(cfg.get<long>("seed"));
    models::Mlp<float> model(shape, seed);
    const long batch = dist::per_rank_batch(cfg.get<long>("batch_size"), cfg.get<long>("global_batch"));
    dist::print0("MLP {} -> {} -> 10: {} parameters; {} train, {} validation, {} test images; batch {} per rank, {} "
                 "per step\n",
                 shape.inputs, fmt::join(shape.hidden, " -> "), model.params().size(), train_set.count, val_set.count,
                 test.count, batch, batch * dist::world_size());

    train::LoopOptions options = loop_options(cfg);
    options.lr.min_ratio = 0.05;
    options.unit = "samples";

    // Epochs over a shuffled order, the same on every rank: each step takes the
    // next world x batch images and this rank trains on its batch of them.
    // The batch buffer outlives each backward().
    Rng rng(seed + 1);
    std::vector<std::int64_t> order(static_cast<std::size_t>(train_set.count));
    std::iota(order.begin(), order.end(), 0);
    std::size_t cursor = order.size();
    std::vector<float> x(static_cast<std::size_t>(batch * train_set.pixels));
    std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
    auto micro_step = [&](long, long) {
        for (long g = 0; g < batch * dist::world_size(); ++g) {
            if (cursor == order.size()) {
                for (std::size_t j = order.size() - 1; j > 0; --j) std::swap(order[j], order[rng.below(j + 1)]);
                cursor = 0;
            }
            const std::int64_t row = order[cursor++];
            const long i = g - dist::rank() * batch;  // position in this rank's batch
            if (i < 0 || i >= batch) continue;
            std::copy_n(train_set.images.begin() + row * train_set.pixels, train_set.pixels,
                        x.begin() + i * train_set.pixels);
            y[static_cast<std::size_t>(i)] = train_set.labels[static_cast<std::size_t>(row)];
        }
        float loss = model.forward(x.data(), y.data(), batch);
        model.backward();
        return train::MicroResult{loss, batch};
    };
    auto eval = [&](long) {
        auto v = evaluate(model, val_set, 1000);
        return train::Metrics{{"val_loss", v.loss}, {"val_accuracy", v.accuracy}};
    };
    auto run = train::train_loop(model.params(), options, micro_step, eval);
    auto t = evaluate(model, test, 1000);
    dist::print0("test accuracy {:.2f}% ({} images)\n", 100 * t.accuracy, test.count);
    return Result{{"loss", run.loss},
                  {"steps", run.steps},
                  {"test_accuracy", t.accuracy},
                  {"test_loss", t.loss},
                  {"val_accuracy", run.last_eval.at("val_accuracy")},
                  {"samples_per_second", run.items_per_second},
                  {"seconds", run.seconds}};
}

}  // namespace

LEVERS_RECIPE(classify) {
    return levers::recipe("classify")
        .describe("MLP on Fashion-MNIST; returns the test accuracy")
        .param("steps", 3000, "optimizer steps")
        .param("batch_size", 128, "images per step and rank")
        .param("global_batch", 0, "if > 0: images per step over all ranks, split evenly (batch_size ignored)")
        .param("hidden", {256, 128}, "hidden layer widths")
        .param("lr", 1e-3, "peak learning rate (warmup, then cosine)")
        .param("warmup", 100, "warmup steps")
        .param("weight_decay", 1e-4, "AdamW decoupled weight decay on weight matrices")
        .param("grad_clip", 1.0, "global gradient-norm limit (0: off)")
        .param("seed", 1, "initialisation and data-order seed")
        .param("log_every", 250, "steps per progress line")
        .param("eval_every", 1000, "steps between validation passes")
        .param("data", "", "directory of the four Fashion-MNIST IDX files (default: Debian's)")
        .run(classify);
}

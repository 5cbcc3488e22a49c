// classify: an MLP learns Fashion-MNIST (Debian's dataset-fashion-mnist);
// 55,000 images train, 5,000 validate during training, the 10,000 test images
// give the final accuracy. The framework owns the loop: this file says what
// the model, the data, one step, a validation and the final test are.
#include "framework/core/rng.hpp"
#include "framework/data/idx.hpp"
#include "framework/dist/context.hpp"
#include "framework/dist/sample_means.hpp"
#include "framework/recipe/recipe.hpp"
#include "models/mlp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace {

using namespace levers;

struct Accuracy {
    double loss = 0, accuracy = 0;
};

// Collective: each rank scores its contiguous share of the images; the sums
// are combined, so every image counts exactly once whatever the rank count.
Accuracy evaluate(models::Mlp<float>& model, const data::ImageDataset& ds, long batch) {
    auto [lo, hi] = dist::Backend::chunk(ds.count, dist::world_size(), dist::rank());
    dist::SampleMeans means({"loss", "accuracy"});
    for (std::int64_t start = lo; start < hi; start += batch) {
        const std::int64_t n = std::min<std::int64_t>(batch, hi - start);
        const double loss = model.forward(ds.images.data() + start * ds.pixels, ds.labels.data() + start, n);
        double correct = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const float* row = model.logits() + i * ds.classes;
            auto best = std::max_element(row, row + ds.classes) - row;
            correct += best == ds.labels[static_cast<std::size_t>(start + i)];
        }
        means.add("loss", loss * static_cast<double>(n), static_cast<double>(n));
        means.add("accuracy", correct, static_cast<double>(n));
    }
    auto m = means.means();
    return {m.at("loss"), m.at("accuracy")};
}

using Mlp = models::Mlp<float>;

// The images, and the shuffled order training walks through them: each epoch
// a fresh permutation drawn from the generator, so the generator's state as
// the epoch began and the cursor say exactly where training is.
struct Images {
    data::ImageDataset train, validation, test;
    std::int64_t batch = 0;
    Rng rng{0};
    std::string epoch_rng;  // rng's state when the current epoch's order was drawn ("" before the first)
    std::vector<std::int64_t> order;
    std::size_t cursor = 0;
    std::vector<float> x;  // this rank's batch; outlives each backward()
    std::vector<std::int32_t> y;

    void next_epoch() {
        epoch_rng = rng.state();
        std::iota(order.begin(), order.end(), 0);
        for (std::size_t j = order.size() - 1; j > 0; --j) std::swap(order[j], order[rng.below(j + 1)]);
        cursor = 0;
    }
    nlohmann::json save_state() const { return {{"epoch_rng", epoch_rng}, {"cursor", cursor}}; }
    void load_state(const nlohmann::json& j) {
        if (const auto s = j.at("epoch_rng").get<std::string>(); !s.empty()) {
            rng.set_state(s);
            next_epoch();
        }
        cursor = j.at("cursor").get<std::size_t>();
    }
};

std::unique_ptr<Images> load_images(const Config& cfg) {
    const auto dir = cfg.get<std::string>("data").empty() ? data::fashion_mnist_dir()
                                                           : std::filesystem::path(cfg.get<std::string>("data"));
    auto all = data::load_idx_dataset(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 10);
    const std::int64_t held_out = 5000;
    auto d = std::make_unique<Images>();
    d->train = all.slice(0, all.count - held_out);
    d->validation = all.slice(all.count - held_out, all.count);
    d->test = data::load_idx_dataset(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10);
    d->batch = dist::per_rank_batch(cfg.get<long>("batch_size"), cfg.get<long>("global_batch"));
    d->rng = Rng(static_cast<std::uint64_t>(cfg.get<long>("seed")) + 1);
    d->order.resize(static_cast<std::size_t>(d->train.count));
    d->cursor = d->order.size();  // the first step draws the first epoch's order
    d->x.resize(static_cast<std::size_t>(d->batch * d->train.pixels));
    d->y.resize(static_cast<std::size_t>(d->batch));
    dist::print0("{} train, {} validation, {} test images; batch {} per rank, {} per step\n", d->train.count,
                 d->validation.count, d->test.count, d->batch, d->batch * dist::world_size());
    return d;
}

std::unique_ptr<Mlp> make_mlp(const Config& cfg) {
    std::vector<long> hidden = cfg.get<std::vector<long>>("hidden");
    models::MlpConfig shape{.inputs = 784, .hidden = std::vector<int>(hidden.begin(), hidden.end()), .classes = 10};
    auto model = std::make_unique<Mlp>(shape, static_cast<std::uint64_t>(cfg.get<long>("seed")));
    dist::print0("MLP 784 -> {} -> 10: {} parameters\n", fmt::join(shape.hidden, " -> "), model->params().size());
    return model;
}

// Epochs over a shuffled order, the same on every rank: each step takes the
// next world x batch images and this rank trains on its batch of them.
MicroResult train_step(Mlp& model, Images& d, const StepInfo&) {
    for (long g = 0; g < d.batch * dist::world_size(); ++g) {
        if (d.cursor == d.order.size()) d.next_epoch();
        const std::int64_t row = d.order[d.cursor++];
        const long i = g - dist::rank() * d.batch;  // position in this rank's batch
        if (i < 0 || i >= d.batch) continue;
        std::copy_n(d.train.images.begin() + row * d.train.pixels, d.train.pixels, d.x.begin() + i * d.train.pixels);
        d.y[static_cast<std::size_t>(i)] = d.train.labels[static_cast<std::size_t>(row)];
    }
    const float loss = model.forward(d.x.data(), d.y.data(), d.batch);
    model.backward();
    return {loss, static_cast<long>(d.batch)};
}

Metrics validate(Mlp& model, Images& d) {
    auto v = evaluate(model, d.validation, 1000);
    return {{"val_loss", v.loss}, {"val_accuracy", v.accuracy}};
}

Result test(Mlp& model, Images& d, const LoopResult&) {
    auto t = evaluate(model, d.test, 1000);
    dist::print0("test accuracy {:.2f}% ({} images)\n", 100 * t.accuracy, d.test.count);
    return {{"test_accuracy", t.accuracy}, {"test_loss", t.loss}};
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
        .param("checkpoint_every", 1000, "steps between training checkpoints in the run directory (0: none)")
        .model(make_mlp)
        .data(load_images)
        .step(train_step)
        .optimizer([](const Config&, train::LoopOptions& o) {
            o.lr.min_ratio = 0.05;
            o.unit = "samples";
        })
        .evaluate_every("eval_every", validate)
        .early_stop("val_accuracy", 3, /*maximize=*/true)
        .checkpoint_every("checkpoint_every")
        .finish(test);
}

// classify: an MLP learns Fashion-MNIST (Debian's dataset-fashion-mnist);
// 55,000 images train, 5,000 validate during training, the 10,000 test images
// give the final accuracy. The framework owns the loop: this file says what
// the model, the data, one step, a validation and the final test are.
#include "levers/data/batcher.hpp"
#include "levers/data/idx.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/sample_means.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/kernels/cross_entropy.hpp"
#include "levers/models/mlp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace levers_recipe_classify {

namespace {

using namespace levers;

const Param<std::vector<int>> hidden{"hidden", {256, 128}, "hidden layer widths", at_least(1)};
const Param<std::string> data_dir{"data", "", "directory of the four Fashion-MNIST IDX files (default: Debian's)"};

struct Accuracy {
    double loss = 0, accuracy = 0;
};

// Collective: each rank scores its contiguous share of the images; the sums
// are combined, so every image counts exactly once whatever the rank count.
Accuracy evaluate(models::Mlp& model, const data::ImageSet& ds, long batch) {
    auto [lo, hi] = dist::Backend::chunk(ds.count(), dist::world_size(), dist::rank());
    dist::SampleMeans means({"loss", "accuracy"});
    Tensor x, y;
    for (std::int64_t start = lo; start < hi; start += batch) {
        const std::int64_t n = std::min<std::int64_t>(batch, hi - start);
        ds.gather_range(start, n, x, y);
        const Tensor logits = model.logits(x);
        const double loss = ops::cross_entropy(logits, y).item();
        const Tensor host = logits.to(Device::cpu(), DType::f32);
        double correct = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const float* row = host.data<float>() + i * ds.classes();
            auto best = std::max_element(row, row + ds.classes()) - row;
            correct += best == ds.label(start + i);
        }
        means.add("loss", loss * static_cast<double>(n), static_cast<double>(n));
        means.add("accuracy", correct, static_cast<double>(n));
    }
    auto m = means.means();
    return {m.at("loss"), m.at("accuracy")};
}

using Mlp = models::Mlp;

// The images (mapped once per node, converted per batch) and the epochs of
// shuffled order training walks through them (data::Batcher).
struct Images {
    data::ImageSet train, validation, test;
    std::optional<data::Batcher> batcher;

    nlohmann::json save_state() const { return batcher->save_state(); }
    void load_state(const nlohmann::json& j) { batcher->load_state(j); }
};

std::unique_ptr<Images> load_images(const Config& cfg) {
    const std::string given = cfg[data_dir];
    const auto dir = given.empty() ? data::fashion_mnist_dir() : std::filesystem::path(given);
    auto all = data::map_idx_images(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 10);
    const std::int64_t held_out = 5000;
    auto d = std::make_unique<Images>();
    d->train = all.slice(0, all.count() - held_out);
    d->validation = all.slice(all.count() - held_out, all.count());
    d->test = data::map_idx_images(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10);
    const std::int64_t batch = rank_batch(cfg);
    d->batcher.emplace(d->train.count(), batch, cfg[settings::seed] + 1,
                       data::Batcher::Order::epochs, dist::world_size(), dist::rank());
    dist::print0("{} train, {} validation, {} test images; batch {} per rank, {} per step\n", d->train.count(),
                 d->validation.count(), d->test.count(), batch, batch * dist::world_size());
    return d;
}

std::unique_ptr<Mlp> make_mlp(const Config& cfg) {
    models::MlpConfig shape{.inputs = 784, .hidden = cfg[hidden], .classes = 10};
    auto model = std::make_unique<Mlp>(shape, cfg[settings::seed]);
    dist::print0("MLP 784 -> {} -> 10: {} parameters\n", fmt::join(shape.hidden, " -> "), model->params().size());
    return model;
}

// Epochs over a shuffled order, the same on every rank: each step takes the
// next world x batch images and this rank trains on its batch of them.
MicroResult train_step(Mlp& model, Images& d, const StepInfo&) {
    Tensor x, y;
    d.train.gather(d.batcher->next(), x, y);
    const Tensor loss = model.loss(x, y);
    loss.backward();
    return {loss.item(), static_cast<long>(x.dim(0))};
}

Metrics validate(Mlp& model, Images& d) {
    auto v = evaluate(model, d.validation, 1000);
    return {{"val_loss", v.loss}, {"val_accuracy", v.accuracy}};
}

Result test(Mlp& model, Images& d, const LoopResult&) {
    auto t = evaluate(model, d.test, 1000);
    dist::print0("test accuracy {:.2f}% ({} images)\n", 100 * t.accuracy, d.test.count());
    return {{"test_accuracy", t.accuracy}, {"test_loss", t.loss}};
}

}  // namespace

LEVERS_RECIPE(classify) {
    return levers::recipe("classify")
        .describe("MLP on Fashion-MNIST; returns the test accuracy")
        .training({.steps = 3000, .lr = 1e-3, .warmup = 100, .weight_decay = 1e-4, .grad_clip = 1.0, .log_every = 250,
                   .checkpoint_every = 1000, .batch_size = 128, .seed = 1, .eval_every = 1000})
        .params(hidden, data_dir)
        .model(make_mlp)
        .data(load_images)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) {
            o.lr.min_ratio = 0.05;
            o.unit = "samples";
        })
        .evaluate(validate)
        .early_stop("val_accuracy", 3, /*maximize=*/true)
        .finish(test);
}

}  // namespace levers_recipe_classify

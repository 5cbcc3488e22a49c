// A complete recipe project in one file: a small CNN learns Fashion-MNIST,
// its test accuracy measured on every rank's share of the test images.
// docs/recipes.md walks through it; the tests build it and run it on 1 and 2
// ranks. Build it against the installed library:
//
//   c++ -std=c++20 -O2 fashion_cnn.cpp $(pkg-config --cflags --libs levers) -o fashion_cnn
//   ./fashion_cnn run fashion_cnn --gpus 2
#include <levers/app/cli.hpp>
#include <levers/data/batcher.hpp>
#include <levers/data/idx.hpp>
#include <levers/distributed/context.hpp>
#include <levers/nn/nn.hpp>
#include <levers/recipe/recipe.hpp>

#include <optional>

using namespace levers;

// The model: two 3x3 convolutions, each with ReLU and 2x2 max pooling, and a linear head.
struct Cnn : nn::Layer {
    nn::Conv2d conv1, conv2;
    nn::MaxPool2d pool;
    nn::Linear head;
    Cnn(std::int64_t channels, std::uint64_t seed)
        : conv1(*this, "conv1", 1, channels, {3, 3}, {.padding = {1, 1}}),
          conv2(*this, "conv2", channels, 2 * channels, {3, 3}, {.padding = {1, 1}}),
          pool(*this, "pool", {2, 2}),
          head(*this, "head", 2 * channels * 7 * 7, 10) {
        initialize(seed);
    }
    Tensor forward(const Tensor& images) override {  // [N, 784] pixels in [0, 1]
        Tensor h = on_device(images).view({images.dim(0), 1, 28, 28});
        h = pool(ops::relu(conv1(h)));
        h = pool(ops::relu(conv2(h)));
        return head(h.reshape({h.dim(0), -1}));
    }
};

// The data: the IDX files (Debian's dataset-fashion-mnist, mapped once per
// node) and the order training walks through them. save_state/load_state
// make a resumed run draw what an uninterrupted one would.
struct Fashion {
    data::ImageSet train, test;
    std::optional<data::Batcher> batcher;
    nlohmann::json save_state() const { return batcher->save_state(); }
    void load_state(const nlohmann::json& j) { batcher->load_state(j); }
};

std::unique_ptr<Fashion> load_fashion(const Config& cfg) {
    const auto dir = data::fashion_mnist_dir();
    auto d = std::make_unique<Fashion>();
    d->train = data::map_idx_images(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 10);
    d->test = data::map_idx_images(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10);
    // Every rank draws the same shuffled global batch and takes its slice of it.
    d->batcher.emplace(d->train.count(), rank_batch(cfg), cfg[settings::seed], data::Batcher::Order::epochs,
                       dist::world_size(), dist::rank());
    return d;
}

MicroResult train_step(Cnn& model, Fashion& d, const StepInfo&) {
    Tensor images, labels;
    d.train.gather(d.batcher->next(), images, labels);
    const Tensor loss = ops::cross_entropy(model(images), labels);
    loss.backward();
    return {loss.item(), images.dim(0)};
}

// Each rank scores its share of the test images; the counts are summed over
// ranks, so every image counts once whatever the rank count.
Metrics test_accuracy(Cnn& model, Fashion& d) {
    const auto [begin, end] = dist::share(d.test.count());
    std::vector<double> right = {0};
    for (std::int64_t at = begin; at < end; at += 500) {
        Tensor images, labels;
        d.test.gather_range(at, std::min<std::int64_t>(500, end - at), images, labels);
        const Tensor guess = ops::argmax(model(images), 1).to(Device::cpu());
        right[0] += ops::sum((guess == labels).to(DType::f32)).item();
    }
    dist::all_reduce_sum(right);
    return {{"test_accuracy", right[0] / static_cast<double>(d.test.count())}};
}

const Param<long> channels{"channels", 16, "channels of the first convolution (the second has twice as many)",
                           at_least(1)};

LEVERS_RECIPE(fashion_cnn) {
    return recipe("fashion_cnn")
        .describe("a small CNN learns Fashion-MNIST")
        .training({.steps = 2000, .lr = 2e-3, .warmup = 50, .batch_size = 64, .seed = 1, .eval_every = 500})
        .params(channels)
        .model([](const Config& cfg) { return std::make_unique<Cnn>(cfg[channels], cfg[settings::seed]); })
        .data(load_fashion)
        .step(train_step)
        .evaluate(test_accuracy);
}

int main(int argc, char** argv) { return levers::main(argc, argv); }

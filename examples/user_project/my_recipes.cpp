// A user's own recipe binary: `./my_recipes run fashion --gpus 2` and every
// other `recipe` command, for the recipes defined here, each a model levers
// does not ship, written as modules and general ops: no backward code.
// `fashion` is a residual MLP, `fashion_cnn` a small CNN, `regression` and
// `logistic` a few lines each (MSE, and a sigmoid with BCE), and user_ops.hpp
// defines ops of the user's own. Linked with levers-recipes, the binary has
// the shipped recipes too: `./my_recipes run grpo --set rewards=last_word`
// trains with this project's own reward.
#include <levers/data/batcher.hpp>
#include <levers/data/idx.hpp>
#include <levers/distributed/context.hpp>
#include <levers/nn/nn.hpp>
#include <levers/app/cli.hpp>
#include <levers/recipe/recipe.hpp>
#include <levers/models/mlp.hpp>
#include <levers/train/rewards.hpp>
#include "residual_mlp.hpp"
#include "small_cnn.hpp"
#include "user_ops.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

using namespace levers;

using user::ResidualMlp;  // residual_mlp.hpp

// Fashion-MNIST (Debian's dataset-fashion-mnist), mapped once per node; each
// rank takes its share of every step's shuffled global batch.
struct Fashion {
    data::ImageSet train, test;
    std::optional<data::Batcher> batcher;
    std::int64_t eval_images = 2000;  // the test images each evaluation during training counts
    nlohmann::json save_state() const { return batcher->save_state(); }
    void load_state(const nlohmann::json& j) { batcher->load_state(j); }
};

std::unique_ptr<Fashion> load_fashion(const Config& cfg) {
    const auto dir = data::fashion_mnist_dir();
    auto d = std::make_unique<Fashion>();
    d->train = data::map_idx_images(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 10);
    d->test = data::map_idx_images(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10);
    d->batcher.emplace(d->train.count(), rank_batch(cfg), cfg[settings::seed], data::Batcher::Order::epochs,
                       dist::world_size(), dist::rank());
    return d;
}

MicroResult fashion_step(ResidualMlp& model, Fashion& d, const StepInfo&) {
    Tensor x, y;
    d.train.gather(d.batcher->next(), x, y);
    const Tensor loss = ops::cross_entropy(model(x), y);
    loss.backward();
    return {loss.item(), static_cast<long>(x.dim(0))};
}

// The first 2,000 test images, each rank its share (evaluation runs without recording).
Metrics fashion_eval(ResidualMlp& model, Fashion& d) {
    auto [lo, hi] = dist::Backend::chunk(2000, dist::world_size(), dist::rank());
    Tensor x, y;
    d.test.gather_range(lo, hi - lo, x, y);
    const Tensor logits = model(x).to(Device::cpu(), DType::f32);
    std::vector<double> sums = {0, static_cast<double>(hi - lo)};
    for (std::int64_t i = 0; i < hi - lo; ++i) {
        const float* row = logits.data<float>() + i * 10;
        sums[0] += std::max_element(row, row + 10) - row == d.test.label(lo + i);
    }
    dist::all_reduce_sum(sums);
    return {{"test_accuracy", sums[0] / sums[1]}};
}

const Param<long> width{"width", 256, "hidden width", at_least(1)};
const Param<int> depth{"depth", 2, "residual blocks", at_least(0)};

LEVERS_RECIPE(fashion) {
    return recipe("fashion")
        .describe("a residual MLP with layernorm, written as modules, learns Fashion-MNIST")
        .training({.steps = 600, .lr = 2e-3, .batch_size = 128, .seed = 1, .eval_every = 200})
        .params(width, depth)
        .model([](const Config& cfg) { return std::make_unique<ResidualMlp>(cfg[width], cfg[depth], cfg[settings::seed]); })
        .data(load_fashion)
        .step(fashion_step)
        .evaluate(fashion_eval);
}

using user::SmallCnn;  // small_cnn.hpp

MicroResult cnn_step(SmallCnn& model, Fashion& d, const StepInfo&) {
    Tensor x, y;
    d.train.gather(d.batcher->next(), x, y);
    const Tensor loss = ops::cross_entropy(model(x), y);
    loss.backward();
    return {loss.item(), static_cast<long>(x.dim(0))};
}

// The share of `count` test images (from the first) the model labels right, over all ranks.
template <class Model> double test_accuracy(Model& model, Fashion& d, std::int64_t count) {
    auto [lo, hi] = dist::Backend::chunk(count, dist::world_size(), dist::rank());
    double right = 0;
    for (std::int64_t at = lo; at < hi; at += 500) {
        Tensor x, y;
        d.test.gather_range(at, std::min<std::int64_t>(500, hi - at), x, y);
        const Tensor guess = ops::argmax(model(x), 1).to(Device::cpu());
        right += ops::sum((guess == y).to(DType::f32)).item();
    }
    std::vector<double> sums = {right};
    dist::all_reduce_sum(sums);
    return sums[0] / static_cast<double>(count);
}

const Param<long> channels{"channels", 24, "channels of the first convolution (the second has twice as many)",
                           at_least(1)};
const Param<long> test_images{"test_images", 10000, "test images the final accuracy counts", between(1, 10000)};
const Param<long> eval_images{"eval_images", 2000, "test images each evaluation during training counts",
                              between(1, 10000)};

LEVERS_RECIPE(fashion_cnn) {
    return recipe("fashion_cnn")
        .describe("a small CNN (two convolutions, pooling, a linear head) learns Fashion-MNIST")
        .training({.steps = 4000, .lr = 2e-3, .warmup = 50, .batch_size = 64, .seed = 1, .eval_every = 1000})
        .params(channels, test_images, eval_images)
        .model([](const Config& cfg) { return std::make_unique<SmallCnn>(cfg[channels], cfg[settings::seed]); })
        .data([](const Config& cfg) {
            auto d = load_fashion(cfg);
            d->eval_images = cfg[eval_images];
            return d;
        })
        .step(cnn_step)
        .evaluate([](SmallCnn& m, Fashion& d) { return Metrics{{"test_accuracy", test_accuracy(m, d, d.eval_images)}}; })
        .finish([](SmallCnn& m, Fashion& d, const LoopResult&, const Config& cfg) {
            return Result{{"final_test_accuracy", test_accuracy(m, d, cfg[test_images])}};
        });
}

// A few lines each: y = 3x - 1 + noise fitted by MSE, and points inside the
// unit circle told from those outside by a sigmoid with BCE. Each rank draws
// its own samples; the user's own op (user_ops.hpp) is the hidden activation.
struct Samples {
    Tensor x, y;
};

struct Regressor : nn::Layer {
    nn::Linear fc;
    explicit Regressor(std::uint64_t seed) : fc(*this, "fc", 1, 1) { initialize(seed); }
    Tensor forward(const Tensor& x) override { return fc(on_device(x)); }
};

LEVERS_RECIPE(regression) {
    return recipe("regression")
        .describe("a line fitted by mean squared error")
        .training({.steps = 200, .lr = 5e-2, .seed = 1})
        .model([](const Config& cfg) { return std::make_unique<Regressor>(cfg[settings::seed]); })
        .data([](const Config& cfg) {
            Rng rng(cfg[settings::seed] + static_cast<std::uint64_t>(dist::rank()));
            std::vector<float> x(256), y(256);
            for (std::size_t i = 0; i < x.size(); ++i) {
                x[i] = static_cast<float>(2 * rng.uniform() - 1);
                y[i] = 3 * x[i] - 1 + static_cast<float>(0.05 * rng.normal());
            }
            return Samples{Tensor::from(x, {256, 1}), Tensor::from(y, {256, 1})};
        })
        .step([](Regressor& m, Samples& s, const StepInfo&) {
            const Tensor loss = ops::mse_loss(m(s.x), m.on_device(s.y));
            loss.backward();
            return MicroResult{loss.item(), 256};
        })
        .finish([](Regressor& m, Samples&, const LoopResult&) {
            return Result{{"slope", m.fc.weight.value().values()[0]}, {"intercept", m.fc.bias->value().values()[0]}};
        });
}

struct Circle : nn::Layer {
    nn::Linear hidden, out;
    explicit Circle(std::uint64_t seed) : hidden(*this, "hidden", 2, 16), out(*this, "out", 16, 1) { initialize(seed); }
    Tensor forward(const Tensor& x) override { return out(user::ScaledTanh::apply(hidden(on_device(x)), 1.5)); }
};

LEVERS_RECIPE(logistic) {
    return recipe("logistic")
        .describe("points inside the unit circle told from the rest by a sigmoid and binary cross-entropy")
        .training({.steps = 400, .lr = 2e-2, .seed = 1})
        .model([](const Config& cfg) { return std::make_unique<Circle>(cfg[settings::seed]); })
        .data([](const Config& cfg) {
            Rng rng(cfg[settings::seed] + static_cast<std::uint64_t>(dist::rank()));
            std::vector<float> x(2 * 512), y(512);
            for (std::size_t i = 0; i < y.size(); ++i) {
                x[2 * i] = static_cast<float>(3 * rng.uniform() - 1.5);
                x[2 * i + 1] = static_cast<float>(3 * rng.uniform() - 1.5);
                y[i] = x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1] < 1 ? 1.0f : 0.0f;
            }
            return Samples{Tensor::from(x, {512, 2}), Tensor::from(y, {512, 1})};
        })
        .step([](Circle& m, Samples& s, const StepInfo&) {
            const Tensor loss = ops::binary_cross_entropy_with_logits(m(s.x), m.on_device(s.y));
            loss.backward();
            return MicroResult{loss.item(), 512};
        })
        .finish([](Circle& m, Samples& s, const LoopResult&) {
            autograd::InferenceMode inference;
            const Tensor right = (m(s.x) > 0.0) == (m.on_device(s.y) > 0.5);
            return Result{{"train_accuracy", ops::mean(right.to(DType::f32)).item()}};
        });
}

// Points on either side of the line y = x; a built-in MLP learns which side.
struct Points {
    Tensor xy, side;
};

Points make_points(const Config& cfg) {
    Rng rng(cfg[settings::seed] + static_cast<std::uint64_t>(dist::rank()));  // each rank its own points
    const long n = cfg[settings::batch_size];
    std::vector<float> xy;
    std::vector<std::int32_t> side;
    for (long i = 0; i < n; ++i) {
        const float x = static_cast<float>(rng.uniform()), y = static_cast<float>(rng.uniform());
        xy.insert(xy.end(), {x, y});
        side.push_back(y > x);
    }
    return {Tensor::from(xy, {n, 2}), Tensor::from(side, {n})};
}

LEVERS_RECIPE(line) {
    return recipe("line")
        .describe("an MLP learns which side of a line points fall on")
        .training({.steps = 300, .lr = 1e-2, .batch_size = 256, .seed = 1})
        .model([](const Config& cfg) {
            return std::make_unique<models::Mlp>(models::MlpConfig{.inputs = 2, .hidden = {16}, .classes = 2},
                                                 cfg[settings::seed]);
        })
        .data(make_points)
        .step([](models::Mlp& m, Points& p, const StepInfo&) {
            const Tensor loss = m.loss(p.xy, p.side);
            loss.backward();
            return MicroResult{loss.item(), static_cast<long>(p.side.numel())};
        });
}

// A reward for the shipped grpo recipe: 1 when the answer's last word is the
// prompt's "word" (its line in the prompts file), ignoring what follows it.
LEVERS_REWARD(last_word, "1 when the answer's last word is the prompt's \"word\"") {
    const std::string word = completion.field("word").get<std::string>();
    std::string text = completion.text;
    while (!text.empty() && !std::isalnum(static_cast<unsigned char>(text.back()))) text.pop_back();
    if (!text.ends_with(word)) return 0.0;
    const std::size_t before = text.size() - word.size();  // the word is whole: nothing alphanumeric just before it
    return before == 0 || !std::isalnum(static_cast<unsigned char>(text[before - 1])) ? 1.0 : 0.0;
}

int main(int argc, char** argv) { return levers::main(argc, argv); }

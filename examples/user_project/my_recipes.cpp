// A user's own recipe binary: `./my_recipes run fashion --gpus 2` and every
// other `recipe` command, for the recipes defined here. `fashion` trains a
// model levers does not ship, written as modules: no backward code.
#include "framework/data/batcher.hpp"
#include "framework/data/idx.hpp"
#include "framework/dist/context.hpp"
#include "framework/nn/nn.hpp"
#include "framework/app/cli.hpp"
#include "framework/recipe/recipe.hpp"
#include "models/mlp.hpp"

#include <algorithm>
#include <optional>

using namespace levers;

// A residual MLP with layernorm: x -> in -> blocks of x + fc(gelu(norm(x))) -> norm -> out.
struct Block : nn::Layer {
    nn::LayerNorm norm;
    nn::Linear fc;
    explicit Block(std::int64_t width) : norm(*this, "norm", width), fc(*this, "fc", width, width) {}
    Tensor forward(const Tensor& x) override { return x + fc(ops::gelu(norm(x))); }
};

struct ResidualMlp : nn::Layer {
    nn::Linear in;
    nn::ModuleList<Block> blocks;
    nn::LayerNorm norm;
    nn::Linear out;
    ResidualMlp(std::int64_t width, int depth, std::uint64_t seed)
        : in(*this, "in", 784, width), blocks(*this, "blocks", depth, width), norm(*this, "norm", width),
          out(*this, "out", width, 10) {
        initialize(seed);
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = in(on_device(x));
        for (Block& b : blocks) h = b(h);
        return out(norm(h));
    }
};

// Fashion-MNIST (Debian's dataset-fashion-mnist), mapped once per node; each
// rank takes its share of every step's shuffled global batch.
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
    d->batcher.emplace(d->train.count(), cfg.get<long>("batch_size"), static_cast<std::uint64_t>(cfg.get<long>("seed")),
                       data::Batcher::Order::epochs, dist::world_size(), dist::rank());
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

LEVERS_RECIPE(fashion) {
    return recipe("fashion")
        .describe("a residual MLP with layernorm, written as modules, learns Fashion-MNIST")
        .training({.steps = 600, .lr = 2e-3})
        .param("batch_size", 128, "images per rank and step")
        .param("width", 256, "hidden width")
        .param("depth", 2, "residual blocks")
        .param("seed", 1, "seed")
        .param("eval_every", 200, "steps between test passes")
        .model([](const Config& cfg) {
            return std::make_unique<ResidualMlp>(cfg.get<long>("width"), cfg.get<int>("depth"),
                                                 static_cast<std::uint64_t>(cfg.get<long>("seed")));
        })
        .data(load_fashion)
        .step(fashion_step)
        .evaluate_every("eval_every", fashion_eval);
}

// Points on either side of the line y = x; a built-in MLP learns which side.
struct Points {
    Tensor xy, side;
};

Points make_points(const Config& cfg) {
    Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")) + dist::rank());  // each rank its own points
    const long n = cfg.get<long>("batch_size");
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
        .training({.steps = 300, .lr = 1e-2})
        .param("batch_size", 256, "points per rank")
        .param("seed", 1, "seed")
        .model([](const Config& cfg) {
            return std::make_unique<models::Mlp>(models::MlpConfig{.inputs = 2, .hidden = {16}, .classes = 2},
                                                 static_cast<std::uint64_t>(cfg.get<long>("seed")));
        })
        .data(make_points)
        .step([](models::Mlp& m, Points& p, const StepInfo&) {
            const Tensor loss = m.loss(p.xy, p.side);
            loss.backward();
            return MicroResult{loss.item(), static_cast<long>(p.side.numel())};
        });
}

int main(int argc, char** argv) { return levers::main(argc, argv); }

#include "levers/train/loop.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;

TEST_CASE("lr schedule: linear warmup to the peak, cosine down to the floor") {
    train::LrSchedule s{.peak = 1.0, .min_ratio = 0.1, .warmup = 10, .total = 110};
    CHECK(s.at(0) == doctest::Approx(0.1));
    CHECK(s.at(9) == doctest::Approx(1.0));
    CHECK(s.at(10) == doctest::Approx(1.0));
    CHECK(s.at(60) == doctest::Approx(0.55));  // halfway down the cosine
    CHECK(s.at(110) == doctest::Approx(0.1));
    CHECK(s.at(500) == doctest::Approx(0.1));
    for (long t = 11; t < 110; ++t) CHECK(s.at(t) <= s.at(t - 1));
}

namespace {
// One parameter vector p; loss = Σ (p - target)², gradient 2 (p - target).
struct Quadratic {
    ParamSet params;
    int id;
    Quadratic() {
        id = params.add("p", {4}, false);
        params.allocate();
    }
    train::MicroResult add_grad(const std::vector<float>& target) {
        double loss = 0;
        for (int i = 0; i < 4; ++i) {
            float d = params.param<float>(id)[i] - target[static_cast<std::size_t>(i)];
            params.grads().data<float>()[params.entry(id).offset + i] += 2 * d;
            loss += d * d;
        }
        return {loss, 1};
    }
};
train::LoopOptions options(long steps, long accum) {
    train::LoopOptions o;
    o.steps = steps;
    o.grad_accum = accum;
    o.lr = {.peak = 0.05, .min_ratio = 1.0, .warmup = 0, .total = steps};
    o.adamw.lr = 0.05;
    o.grad_clip = 0;
    o.log_every = 1000;
    return o;
}
}  // namespace

TEST_CASE("training loop: AdamW drives a quadratic to its minimum and evaluates at the end") {
    Quadratic q;
    const std::vector<float> target = {1, -2, 3, 0.5f};
    long evaluations = 0;
    auto opts = options(600, 1);
    opts.lr.min_ratio = 0.01;  // decay so Adam settles instead of hovering at ±lr
    opts.log_every = 100;
    auto result = train::train_loop(
        q.params, opts, [&](long, long) { return q.add_grad(target); },
        [&](long step) {
            ++evaluations;
            return train::Metrics{{"step", static_cast<double>(step)}};
        });
    for (int i = 0; i < 4; ++i) CHECK(q.params.param<float>(q.id)[i] == doctest::Approx(target[i]).epsilon(0.01));
    CHECK(evaluations == 1);
    CHECK(result.last_eval.at("step") == 600);
    CHECK(result.loss < 1e-3);  // mean over the last 100 steps
    CHECK(result.loss_curve.size() == 6);
}

TEST_CASE("gradient accumulation averages the micro-batches' gradients") {
    const std::vector<float> a = {1, 1, 1, 1}, b = {3, -1, 0, 2}, mean = {2, 0, 0.5f, 1.5f};
    Quadratic accumulated, single;
    train::train_loop(accumulated.params, options(5, 2),
                      [&](long, long micro) { return accumulated.add_grad(micro == 0 ? a : b); }, {});
    // Σ (p-a)² + (p-b)² has the gradient of 2 Σ (p-mean)², so the mean target with the same average gradient:
    train::train_loop(single.params, options(5, 1), [&](long, long) { return single.add_grad(mean); }, {});
    for (int i = 0; i < 4; ++i)
        CHECK(accumulated.params.param<float>(accumulated.id)[i] == doctest::Approx(single.params.param<float>(single.id)[i]));
}

TEST_CASE("training loop: a diverging loss stops with a message naming the step; bad options are refused") {
    Quadratic q;
    auto nan_at_3 = [&](long step, long) {
        return train::MicroResult{step == 3 ? std::nan("") : 1.0, 1};
    };
    CHECK_THROWS_WITH_AS(train::train_loop(q.params, options(10, 1), nan_at_3, {}),
                         doctest::Contains("loss is nan at step 3"), Error);
    auto bad = options(10, 1);
    bad.grad_accum = 0;
    CHECK_THROWS_WITH_AS(train::train_loop(q.params, bad, nan_at_3, {}), doctest::Contains("grad_accum must be >= 1"),
                         Error);
}

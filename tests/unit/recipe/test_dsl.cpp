// The framework-owned loop of the DSL: .model/.data/.step/.evaluate/
// .early_stop/.finish, parameters read through their handles, and what
// build() refuses.
#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/recipe/run_dir.hpp"
#include "tests/temp_dir.hpp"
#include "levers/models/mlp.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

using namespace levers;

namespace {

// Two Gaussian-ish blobs on a line: class = x > 0.
struct Blobs {
    std::vector<float> x;
    std::vector<std::int32_t> y;
    explicit Blobs(int n) {
        for (int i = 0; i < n; ++i) {
            const float v = static_cast<float>(i % 2 ? 1 : -1) * (0.5f + static_cast<float>(i % 7) / 7.0f);
            x.push_back(v);
            y.push_back(v > 0);
        }
    }
};

using Mlp = models::Mlp;

std::unique_ptr<Mlp> make_model(const Config& c) {
    return std::make_unique<Mlp>(models::MlpConfig{.inputs = 1, .hidden = {8}, .classes = 2}, c[settings::seed]);
}
Blobs make_data(const Config&) { return Blobs(64); }
Tensor inputs(const Blobs& d) { return Tensor::from(d.x, {static_cast<std::int64_t>(d.x.size()), 1}); }
Tensor labels(const Blobs& d) { return Tensor::from(d.y, {static_cast<std::int64_t>(d.y.size())}); }
MicroResult train_step(Mlp& m, Blobs& d, const StepInfo&) {
    const Tensor loss = m.loss(inputs(d), labels(d));
    loss.backward();
    return {loss.item(), static_cast<long>(d.y.size())};
}
Metrics validate(Mlp& m, Blobs& d) { return {{"val_loss", m.loss(inputs(d), labels(d)).item()}}; }

auto blobs(long steps) {
    return recipe("blobs")
        .training({.steps = steps, .lr = 0.05, .log_every = 1000, .seed = 3, .eval_every = 10})
        .model(make_model)
        .data(make_data)
        .step(train_step)
        .evaluate(validate);
}

}  // namespace

TEST_CASE("the framework's loop trains the model the recipe declares and reports its metrics") {
    Recipe p = blobs(60).finish([](Mlp&, Blobs& d, const LoopResult& r) {
        return Result{{"examples", d.y.size()}, {"evaluated_steps", r.steps}};
    });
    CHECK(p.framework_loop());
    Result r = p.run(p.defaults());
    CHECK(r["steps"] == 60);
    CHECK(r["examples"] == 64);
    CHECK(r["val_loss"].get<double>() < 0.3);  // separable: the loss falls far below log 2
    CHECK(r["loss"].get<double>() < std::log(2.0));
}

TEST_CASE("the run's context reaches every function of the recipe with its config, and writes where it says") {
    testing::TempDir tmp;
    std::vector<std::filesystem::path> seen;
    Recipe p = recipe("ctx")
                 .training({.steps = 2L, .lr = 0.05, .log_every = 1000, .checkpoint_every = 1, .seed = 3})
                 .model([&](const Config& c) {
                     seen.push_back(c.run().dir);
                     return make_model(c);
                 })
                 .data(make_data)
                 .step(train_step)
                 .finish([&](Mlp&, Blobs&, const LoopResult&, const Config& c) {
                     seen.push_back(c.run().dir);
                     return Result{};
                 });
    Config cfg = p.defaults();
    CHECK(cfg.run().dir.empty());  // outside `recipe run`: no directory, f32
    CHECK(cfg.run().compute == DType::f32);
    cfg.set_run({.dir = tmp.path()});
    p.run(cfg);
    CHECK(seen == std::vector<std::filesystem::path>{tmp.path(), tmp.path()});
    CHECK(std::filesystem::exists(tmp.path() / "metrics.csv"));
    CHECK(std::filesystem::exists(tmp.path() / "checkpoints" / "step-00000002.ckpt"));
    // .finish adds an object's fields (nothing for Result{}); anything else is refused by name.
    Recipe bad = blobs(1).finish([](Mlp&, Blobs&, const LoopResult&) { return Result(3); });
    CHECK_THROWS_WITH_AS(bad.run(bad.defaults()), doctest::Contains(".finish returned number JSON"), Error);
    // A copy carries its context; the ranks a launcher starts get it through the two exported variables.
    const Config copy = cfg;
    CHECK(copy.run().dir == tmp.path());
    CHECK(run_exports({}).empty());
    const auto exports = run_exports({.dir = tmp.path(), .resume = tmp.path() / "a.ckpt"});
    REQUIRE(exports.size() == 2);
    CHECK(exports[0] == std::pair<std::string, std::string>{"LEVERS_RUN_DIR", tmp.path().string()});
    CHECK(exports[1] == std::pair<std::string, std::string>{"LEVERS_RESUME", (tmp.path() / "a.ckpt").string()});
    // A launched rank reads back what its launcher exported.
    for (const auto& [name, value] : exports) ::setenv(name.c_str(), value.c_str(), 1);
    const RunContext back = exported_run();
    for (const auto& [name, value] : exports) ::unsetenv(name.c_str());
    CHECK(back.dir == tmp.path());
    CHECK(back.resume == tmp.path() / "a.ckpt");
    CHECK(exported_run().dir.empty());
}

TEST_CASE("early stopping ends training once the metric stops improving") {
    // A metric that never improves after the first evaluation: patience 2 stops at the third.
    Recipe p = recipe("flat")
                 .training({.steps = 100L, .lr = 0.01, .log_every = 1000, .seed = 1, .eval_every = 5})
                 .model(make_model)
                 .data(make_data)
                 .step(train_step)
                 .evaluate([](Mlp&, Blobs&) { return Metrics{{"score", 1.0}}; })
                 .early_stop("score", 2, /*maximize=*/true);
    Result r = p.run(p.defaults());
    CHECK(r["stopped_early"] == true);
    CHECK(r["steps"] == 15);
    CHECK(r["best_step"] == 5);
}

TEST_CASE("build() refuses an incomplete or inconsistent loop, naming what is wrong") {
    // A .step of other types, or a loop without .data, does not compile
    // (tests/compile_fail); the rest is refused by build().
    auto untrained = recipe("n").params(settings::seed).model(make_model).data(make_data).step(train_step);
    CHECK_THROWS_WITH_AS(untrained.build(), doctest::Contains("declare the framework loop's settings with .training("),
                         Error);
    CHECK_THROWS_WITH_AS(recipe("d").training({}).params(settings::steps.with_default(3)),
                         doctest::Contains("'steps' declared twice"), Error);
    CHECK_THROWS_WITH_AS(recipe("b").params(Param<std::string>{"name", "x", "text", at_least(1)}),
                         doctest::Contains("parameter 'name' is a string; bounds (>= 1) limit numbers only"), Error);
    CHECK_THROWS_WITH_AS(recipe("b").params(Param<int>{"width", 0, "hidden width", at_least(1)}),
                         doctest::Contains("the default of parameter 'width': 0 is out of range; it must be >= 1"),
                         Error);

    CHECK_THROWS_WITH_AS(blobs(5).early_stop("val_loss", 0).build(), doctest::Contains("patience >= 1"), Error);
    auto no_eval = recipe("e").training({.steps = 1, .lr = 0.1, .seed = 1}).model(make_model)
                       .data(make_data).step(train_step).early_stop("val_loss", 2);
    CHECK_THROWS_WITH_AS(no_eval.build(), doctest::Contains("needs .evaluate"), Error);
    auto no_interval = recipe("i").training({.steps = 1, .lr = 0.1, .seed = 1}).model(make_model).data(make_data)
                           .step(train_step).evaluate(validate);
    CHECK_THROWS_WITH_AS(no_interval.build(), doctest::Contains("give its default in .training({.eval_every = N})"),
                         Error);
    CHECK_THROWS_WITH_AS(blobs(5).run([](const Config&) { return Result{}; }).build(),
                         doctest::Contains("exclude each other"), Error);
    // The early-stop metric must be one the evaluation reports.
    Recipe bad_metric = blobs(20).early_stop("accuracy", 2);
    CHECK_THROWS_WITH_AS(bad_metric.run(bad_metric.defaults()), doctest::Contains("reports only: val_loss"), Error);
}

TEST_CASE("on a GPU, a model type without to_device is refused by name before training") {
    struct CpuOnly {
        ParamSet p;
        CpuOnly() {
            p.add("w", {2}, true);
            p.allocate();
        }
        ParamSet& params() { return p; }
    };
    Recipe plan = recipe("cpu_only")
                    .training({.steps = 3L, .lr = 0.01})
                    .model([](const Config&) { return std::make_unique<CpuOnly>(); })
                    .data([](const Config&) { return 0; })
                    .step([](CpuOnly&, int&, const StepInfo&) { return MicroResult{}; });
    dist::join({.device = Device::cuda(0)}, nullptr);
    CHECK_THROWS_WITH_AS(plan.run(plan.defaults()),
                         doctest::Contains("recipe 'cpu_only' cannot run on cuda:0: its model type has no "
                                           "to(Device, DType)"),
                         Error);
    dist::leave();
}

TEST_CASE("--precision reaches the model's to_device, and a model that takes no dtype is refused bf16 by name") {
    struct Moves {
        ParamSet p;
        DType* seen;
        explicit Moves(DType* s) : seen(s) {
            p.add("w", {2}, true);
            p.allocate();
        }
        ParamSet& params() { return p; }
        void to_device(Device, DType compute) { *seen = compute; }  // stays on the CPU: enough to see the call
    };
    struct F32Only {
        ParamSet p;
        F32Only() {
            p.add("w", {2}, true);
            p.allocate();
        }
        ParamSet& params() { return p; }
        void to_device(Device) {}
    };
    static DType seen = DType::f32;
    Recipe takes_dtype = recipe("takes_dtype")
                           .training({.steps = 1L, .lr = 0.01})
                           .model([](const Config&) { return std::make_unique<Moves>(&seen); })
                           .data([](const Config&) { return 0; })
                           .step([](Moves&, int&, const StepInfo&) { return MicroResult{}; });
    Recipe f32_only = recipe("f32_only")
                        .training({.steps = 1L, .lr = 0.01})
                        .model([](const Config&) { return std::make_unique<F32Only>(); })
                        .data([](const Config&) { return 0; })
                        .step([](F32Only&, int&, const StepInfo&) { return MicroResult{}; });
    dist::join({.device = Device::cuda(0)}, nullptr);
    const auto in_bf16 = [](const Recipe& p) {
        Config c = p.defaults();
        c.set_run({.compute = DType::bf16});
        return c;
    };
    takes_dtype.run(in_bf16(takes_dtype));
    CHECK(seen == DType::bf16);
    CHECK_THROWS_WITH_AS(f32_only.run(in_bf16(f32_only)),
                         doctest::Contains("recipe 'f32_only' cannot compute in bf16: its model type's "
                                           "to_device(Device) takes no dtype"),
                         Error);
    dist::leave();
}

TEST_CASE("a parameter is read through its handle with its own type, and .training declares the shared settings") {
    const Param<int> width{"width", 16, "hidden width", at_least(1)};
    const Param<std::vector<int>> widths{"widths", {8, 4}, "hidden widths", at_least(1)};
    const Param<double> scale{"scale", 0.5, "a factor"};
    const Param corpus{"corpus", "", "a text file"};  // text defaults are std::string parameters
    const Param<bool> fast{"fast", false, "a switch"};
    Recipe r = recipe("typed")
                   .training({.steps = 4, .lr = 0.1, .batch_size = 32, .seed = 9})
                   .params(width, widths, scale, corpus, fast)
                   .model(make_model)
                   .data(make_data)
                   .step(train_step);
    Config cfg = r.defaults();
    CHECK(cfg[width] == 16);
    CHECK(cfg[widths] == std::vector<int>{8, 4});
    CHECK(cfg[scale] == 0.5);
    CHECK(cfg[corpus].empty());
    CHECK(cfg[fast] == false);
    CHECK(cfg[settings::steps] == 4);
    CHECK(cfg[settings::batch_size] == 32);
    CHECK(cfg[settings::global_batch] == 0);
    CHECK(cfg[settings::seed] == 9u);
    CHECK(cfg[settings::grad_accum] == 1);
    CHECK(cfg[settings::checkpoint_every] == 0);
    CHECK(rank_batch(cfg) == 32);
    cfg.set("width", "64");
    cfg.set("widths", "3,2,1");
    cfg.set("corpus", "books.txt");
    CHECK(cfg[width] == 64);
    CHECK(cfg[widths] == std::vector<int>{3, 2, 1});
    CHECK(cfg[corpus] == "books.txt");
    // The batch size is the micro-batch `recipe plan` varies; eval_every is declared only where given.
    CHECK(r.loop_spec()->micro_batch == "batch_size");
    CHECK_FALSE(cfg.has("eval_every"));
    // A handle the recipe does not declare, or one of the same name and another type, is refused by name.
    const Param<int> other{"other", 1, "not declared"};
    CHECK_THROWS_WITH_AS(cfg[other], doctest::Contains("unknown parameter 'other'"), Error);
    const Param<std::string> width_as_text{"width", "", "the same name, another type"};
    CHECK_THROWS_WITH_AS(cfg[width_as_text], doctest::Contains("parameter 'width' is declared as int"), Error);
    // An integer that does not fit the handle's type.
    const Param<std::int8_t> small{"width", 1, "a narrow read"};
    cfg.set("width", "300");
    CHECK_THROWS_WITH_AS(cfg[small], doctest::Contains("parameter 'width': 300 does not fit"), Error);
    // A framework setting with a recipe's own default.
    Recipe seeded = recipe("seeded").params(settings::seed.with_default(42)).run([](const Config&) { return Result{}; });
    CHECK(seeded.defaults()[settings::seed] == 42u);
}

// The metrics files a run writes: metrics.jsonl's training rows as
// nlohmann::json writes them (keys sorted, doubles that read back exactly and
// stay doubles), the CSV beside them, and when rows reach the files.
#include "levers/train/metrics_log.hpp"

#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using namespace levers;

namespace {
std::vector<std::string> lines_of(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}
}  // namespace

TEST_CASE("metrics log: a training row is the JSON nlohmann writes, the CSV row the same numbers") {
    testing::TempDir tmp;
    const double inf = std::numeric_limits<double>::infinity();
    struct Row {
        long step;
        double loss, lr, norm;
        std::int64_t items;
        double ips, wall;
        std::map<std::string, double> more;
    };
    const std::vector<Row> rows = {
        {1, 2.302585092994046, 1e-5, 0.1 + 0.2, 128, 4.6e5, 0.001},
        {2, 2.0, 3e-4, 1e21, 256, 12.0, 1e-7, {{"kl", 0.5}, {"rewards/chosen", -1.25}, {"a \"quoted\" key", 3.0}}},
        {3, 1.5, 2e-3, inf, 384, -0.0, 1.0, {{"loss", 7.0}, {"zz", std::nan("")}}},
    };
    {
        train::MetricsLog log(tmp.path());
        for (const Row& r : rows) log.train(r.step, r.loss, r.lr, r.norm, r.items, r.ips, r.wall, r.more);
    }
    const auto jsonl = lines_of(tmp.path() / "metrics.jsonl");
    const auto csv = lines_of(tmp.path() / "metrics.csv");
    REQUIRE(jsonl.size() == rows.size());
    REQUIRE(csv.size() == rows.size() + 1);
    CHECK(csv[0] == "step,loss,lr,grad_norm,items,items_per_second,wall_s");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        nlohmann::json expected = {{"kind", "train"}, {"step", r.step}, {"loss", r.loss}, {"lr", r.lr},
                                   {"grad_norm", r.norm}, {"items", r.items}, {"items_per_second", r.ips},
                                   {"wall_s", r.wall}};
        for (const auto& [k, v] : r.more) expected[k] = v;
        CAPTURE(jsonl[i]);
        // The same keys in the same order, each number of the same type and value: re-dumped, the same text.
        CHECK(nlohmann::json::parse(jsonl[i]).dump() == expected.dump());
        CHECK(jsonl[i] == expected.dump());
        std::istringstream fields(csv[i + 1]);
        std::vector<double> got;
        for (std::string f; std::getline(fields, f, ',');) got.push_back(std::stod(f));
        const std::vector<double> want = {static_cast<double>(r.step), r.loss, r.lr, r.norm,
                                          static_cast<double>(r.items), r.ips, r.wall};
        CHECK(got == want);  // exact: the shortest text that reads back as the same double
    }
}

TEST_CASE("metrics log: rows reach the files on flush, at an evaluation and at the end") {
    testing::TempDir tmp;
    train::MetricsLog log(tmp.path());
    log.train(1, 2.0, 1e-3, 1.0, 8, 100.0, 0.5);
    log.flush();
    CHECK(lines_of(tmp.path() / "metrics.jsonl").size() == 1);
    CHECK(lines_of(tmp.path() / "metrics.csv").size() == 2);
    log.train(2, 1.9, 1e-3, 1.0, 16, 100.0, 0.6);
    log.eval(2, {{"val_loss", 1.8}}, 0.7);
    CHECK(lines_of(tmp.path() / "metrics.jsonl").size() == 3);
    CHECK(lines_of(tmp.path() / "metrics.csv").size() == 3);
    CHECK(lines_of(tmp.path() / "eval.csv") == std::vector<std::string>{"step,wall_s,val_loss", "2,0.7,1.8"});
}

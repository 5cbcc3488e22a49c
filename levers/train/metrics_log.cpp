#include "levers/train/metrics_log.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

namespace levers::train {

namespace fs = std::filesystem;

namespace {
std::ofstream open_append(const fs::path& p) {
    std::ofstream out(p, std::ios::app);
    LEVERS_CHECK(out.is_open(), "cannot write the metrics file {}", p.string());
    return out;
}
// Shortest text that reads back as the same double: curves compare exactly.
std::string exact(double v) { return fmt::format("{}", v); }
}  // namespace

MetricsLog::MetricsLog(const fs::path& dir) : dir_(dir) {
    const bool fresh = !fs::exists(dir / "metrics.csv");
    jsonl_ = open_append(dir / "metrics.jsonl");
    csv_ = open_append(dir / "metrics.csv");
    if (fresh) csv_ << "step,loss,lr,grad_norm,items,items_per_second,wall_s\n" << std::flush;
}

void MetricsLog::train(long step, double loss, double lr, double grad_norm, std::int64_t items,
                       double items_per_second, double wall_s, const std::map<std::string, double>& more) {
    nlohmann::json j = {{"kind", "train"}, {"step", step},   {"loss", loss},
                        {"lr", lr},        {"grad_norm", grad_norm}, {"items", items},
                        {"items_per_second", items_per_second}, {"wall_s", wall_s}};
    for (const auto& [k, v] : more) j[k] = v;
    jsonl_ << j.dump() << '\n' << std::flush;
    csv_ << fmt::format("{},{},{},{},{},{},{}\n", step, exact(loss), exact(lr), exact(grad_norm), items,
                        exact(items_per_second), exact(wall_s))
         << std::flush;
}

void MetricsLog::eval(long step, const std::map<std::string, double>& metrics, double wall_s) {
    nlohmann::json j = {{"kind", "eval"}, {"step", step}, {"wall_s", wall_s}};
    for (const auto& [k, v] : metrics) j[k] = v;
    jsonl_ << j.dump() << '\n' << std::flush;
    if (eval_columns_.empty()) {
        // The first evaluation fixes the columns; later ones report the same metrics.
        for (const auto& [k, v] : metrics) eval_columns_.push_back(k);
        const bool fresh = !fs::exists(dir_ / "eval.csv");
        eval_csv_ = open_append(dir_ / "eval.csv");
        if (fresh) eval_csv_ << fmt::format("step,wall_s,{}\n", fmt::join(eval_columns_, ","));
    }
    std::string row = fmt::format("{},{}", step, exact(wall_s));
    for (const auto& c : eval_columns_) {
        auto it = metrics.find(c);
        row += ',';
        if (it != metrics.end()) row += exact(it->second);
    }
    eval_csv_ << row << '\n' << std::flush;
}

void trim_metrics(const fs::path& dir, long step) {
    // Every row starts with its step: "12,..." in the CSVs, {"step":12,...} in metrics.jsonl.
    auto row_step = [](const std::string& line) -> long {
        if (line.starts_with("{")) {
            const auto j = nlohmann::json::parse(line, nullptr, false);
            return j.is_object() && j.contains("step") ? j["step"].get<long>() : 0;
        }
        return std::strtol(line.c_str(), nullptr, 10);
    };
    for (const char* name : {"metrics.csv", "metrics.jsonl", "eval.csv"}) {
        const fs::path file = dir / name;
        std::ifstream in(file);
        if (!in) continue;
        std::string kept, line;
        for (bool header = std::string(name).ends_with(".csv"); std::getline(in, line); header = false)
            if (header || row_step(line) <= step) kept += line + '\n';
        in.close();
        const fs::path tmp = file.string() + ".trim";
        std::ofstream(tmp) << kept;
        fs::rename(tmp, file);
    }
}

}  // namespace levers::train

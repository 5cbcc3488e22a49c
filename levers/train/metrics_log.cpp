#include "levers/train/metrics_log.hpp"

#include "levers/core/error.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string_view>

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

using Row = fmt::memory_buffer;

// A number as nlohmann::json writes one, without building a json object (a
// row a step, where a small model's step is 0.2 ms): the shortest text that
// reads back as the same double, ".0" after an integral one so that it reads
// back as a double, null for NaN and the infinities.
void put_number(Row& row, double v) {
    if (!std::isfinite(v)) return row.append(std::string_view("null"));
    const std::size_t begin = row.size();
    fmt::format_to(std::back_inserter(row), FMT_COMPILE("{}"), v);
    if (std::all_of(row.begin() + begin, row.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9'); }))
        row.append(std::string_view(".0"));
}

// A training row of metrics.jsonl: its fields in nlohmann::json's order (keys
// sorted), the step's own metrics merged in (one of theirs replaces a field of
// the same name).
void put_train_row(Row& row, long step, double loss, double lr, double grad_norm, std::int64_t items,
                   double items_per_second, double wall_s, const std::map<std::string, double>& more) {
    enum class Kind { number, integer, text };
    struct Field {
        std::string_view key;
        Kind kind;
        double number = 0;
        std::int64_t integer = 0;
    };
    const Field fields[] = {{"grad_norm", Kind::number, grad_norm},
                            {"items", Kind::integer, 0, items},
                            {"items_per_second", Kind::number, items_per_second},
                            {"kind", Kind::text},
                            {"loss", Kind::number, loss},
                            {"lr", Kind::number, lr},
                            {"step", Kind::integer, 0, step},
                            {"wall_s", Kind::number, wall_s}};
    auto out = std::back_inserter(row);
    char sep = '{';
    auto put_more = [&](const std::string& key, double v) {
        row.push_back(sep);
        row.append(std::string_view(nlohmann::json(key).dump()));  // the key escaped as JSON escapes it
        row.push_back(':');
        put_number(row, v);
        sep = ',';
    };
    auto it = more.begin();
    for (const Field& f : fields) {
        for (; it != more.end() && it->first < f.key; ++it) put_more(it->first, it->second);
        if (it != more.end() && it->first == f.key) {
            put_more(it->first, it->second);
            ++it;
            continue;
        }
        fmt::format_to(out, FMT_COMPILE("{}\"{}\":"), sep, f.key);
        sep = ',';
        if (f.kind == Kind::number) put_number(row, f.number);
        else if (f.kind == Kind::integer) fmt::format_to(out, FMT_COMPILE("{}"), f.integer);
        else row.append(std::string_view("\"train\""));
    }
    for (; it != more.end(); ++it) put_more(it->first, it->second);
    row.append(std::string_view("}\n"));
}
}  // namespace

MetricsLog::MetricsLog(const fs::path& dir) : dir_(dir) {
    const bool fresh = !fs::exists(dir / "metrics.csv");
    jsonl_ = open_append(dir / "metrics.jsonl");
    csv_ = open_append(dir / "metrics.csv");
    if (fresh) csv_ << "step,loss,lr,grad_norm,items,items_per_second,wall_s\n" << std::flush;
}

void MetricsLog::train(long step, double loss, double lr, double grad_norm, std::int64_t items,
                       double items_per_second, double wall_s, const std::map<std::string, double>& more) {
    Row row;
    put_train_row(row, step, loss, lr, grad_norm, items, items_per_second, wall_s, more);
    jsonl_.write(row.data(), static_cast<std::streamsize>(row.size()));
    row.clear();
    fmt::format_to(std::back_inserter(row), FMT_COMPILE("{},{},{},{},{},{},{}\n"), step, loss, lr, grad_norm, items,
                   items_per_second, wall_s);  // as exact() writes them
    csv_.write(row.data(), static_cast<std::streamsize>(row.size()));
    flush_if_due();
}

void MetricsLog::eval(long step, const std::map<std::string, double>& metrics, double wall_s) {
    nlohmann::json j = {{"kind", "eval"}, {"step", step}, {"wall_s", wall_s}};
    for (const auto& [k, v] : metrics) j[k] = v;
    jsonl_ << j.dump() << '\n';
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
    eval_csv_ << row << '\n';
    flush();
}

void MetricsLog::flush() {
    for (std::ofstream* f : {&jsonl_, &csv_, &eval_csv_})
        if (f->is_open()) f->flush();
    flushed_ = Clock::now();
}

void MetricsLog::flush_if_due() {
    if (seconds_since(flushed_) >= 1.0) flush();
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

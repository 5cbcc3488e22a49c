#include "levers/app/sweep.hpp"

#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/read_file.hpp"
#include "levers/core/split.hpp"
#include "levers/launch/child_setup.hpp"
#include "levers/launch/slot_ledger.hpp"

#include <boost/asio.hpp>
#include <boost/process.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

namespace levers {

namespace fs = std::filesystem;
namespace bp = boost::process;
namespace asio = boost::asio;

std::vector<Cell> grid_cells(const std::vector<std::string>& grids, std::vector<Cell> base) {
    if (base.empty()) base.emplace_back();
    for (const auto& grid : grids) {
        const auto eq = grid.find('=');
        LEVERS_CHECK(eq != std::string::npos && eq > 0, "--grid expects name=v1,v2,..., got '{}'", grid);
        const std::string name = grid.substr(0, eq), values = grid.substr(eq + 1);
        const std::vector<std::string> items = split(values);
        for (const auto& v : items)
            LEVERS_CHECK(!v.empty(), "--grid {}: {} (give {}=v1,v2,...)", grid,
                         values.empty() ? "no values" : "an empty value", name);
        std::vector<Cell> crossed;
        for (const auto& cell : base) {
            LEVERS_CHECK(!cell.count(name), "--grid {}: '{}' is already set by another --grid or the cells file",
                         grid, name);
            for (const auto& v : items) {
                Cell c = cell;
                c[name] = v;
                crossed.push_back(std::move(c));
            }
        }
        base = std::move(crossed);
    }
    return base;
}

std::vector<Cell> read_cells_file(const fs::path& file) {
    const auto j = nlohmann::json::parse(read_file(file), nullptr, false);
    LEVERS_CHECK(j.is_array() && !j.empty(), "--cells {}: expected a JSON array of objects like "
                 "[{{\"lr\": 0.001, \"lora_r\": 4}}], one per cell", file.string());
    std::vector<Cell> cells;
    for (std::size_t i = 0; i < j.size(); ++i) {
        LEVERS_CHECK(j[i].is_object(), "--cells {}: entry {} is not an object", file.string(), i);
        Cell c;
        for (const auto& [k, v] : j[i].items()) {
            if (v.is_string()) c[k] = v.get<std::string>();
            else if (v.is_array()) {
                std::string list;
                for (const auto& x : v) list += (list.empty() ? "" : ",") + (x.is_string() ? x.get<std::string>() : x.dump());
                c[k] = list;
            } else c[k] = v.dump();
        }
        cells.push_back(std::move(c));
    }
    return cells;
}

Result CellOutcome::to_json() const {
    Result j = {{"params", params}, {"status", ok ? "ok" : "failed"}, {"exit_code", exit_code},
                {"seconds", seconds}, {"dir", dir.string()}, {"log", log.string()}};
    if (ok) j["result"] = result;
    else j["error"] = error;
    return j;
}

namespace {

std::string describe_cell(const Cell& c) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : c) parts.push_back(k + "=" + v);
    return parts.empty() ? "(defaults)" : fmt::format("{}", fmt::join(parts, " "));
}

class SweepRunner {
public:
    explicit SweepRunner(const SweepOptions& o)
        // Cells take GPUs where they compute on GPUs, else CPU slots.
        : o_(o),
          ledger_(launch::SlotLedger::for_node(o.device == Device::Kind::cuda ? node_gpu_count() : 0)),
          timer_(io_), signals_(io_, SIGINT, SIGTERM) {
        outcomes_.resize(o.cells.size());
        for (std::size_t i = 0; i < o.cells.size(); ++i) {
            queue_.push_back(i);
            outcomes_[i].params = o.cells[i];
            outcomes_[i].dir = o.dir / fmt::format("cell-{:02}", i);
            outcomes_[i].log = o.dir / fmt::format("cell-{:02}.log", i);
            outcomes_[i].error = "not started";
        }
        // A cell of N CPU ranks takes min(N, slots) slots, like `recipe run`.
        const int slots = static_cast<int>(ledger_.slots().size());
        need_ = ledger_.kind() == Device::Kind::cpu ? std::min<int>(o.gpus_per_cell, slots) : o.gpus_per_cell;
        LEVERS_CHECK(need_ <= slots, "--gpus-per-cell {}: this node has {} GPUs", o.gpus_per_cell, slots);
    }

    std::vector<CellOutcome> run() {
        signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
            if (ec) return;
            interrupted_ = sig;
            fmt::print(stderr, "levers: sweep interrupted; stopping {} running cells\n", running_.size());
            queue_.clear();
            for (auto& [i, cell] : running_) ::kill(cell->child.id(), SIGTERM);
        });
        start_ready();
        io_.run();
        return std::move(outcomes_);
    }

    int interrupted() const { return interrupted_; }

private:
    struct Running {
        bp::child child;
        launch::SlotLease lease;
        std::chrono::steady_clock::time_point start;
    };

    bool may_start_more() const {
        return !queue_.empty() && (o_.max_parallel <= 0 || static_cast<int>(running_.size()) < o_.max_parallel);
    }

    void start_ready() {
        while (may_start_more()) {
            auto lease = ledger_.try_acquire(need_, "sweep " + o_.recipe);
            if (!lease) break;
            start(queue_.front(), std::move(*lease));
            queue_.pop_front();
        }
        if (!queue_.empty() && running_.empty() && !said_waiting_) {
            LEVERS_CHECK(o_.wait, "no {} free to start a cell (--no-wait: not waiting)", ledger_.unit());
            fmt::print("sweep: waiting for {}s; see `recipe status` for who holds them\n", ledger_.unit());
            std::fflush(stdout);
            said_waiting_ = true;
        }
        if (!queue_.empty()) {
            // Slots held by other jobs free up without telling us: look again shortly.
            timer_.expires_after(std::chrono::milliseconds(200));
            timer_.async_wait([this](const boost::system::error_code& ec) {
                if (!ec) start_ready();
            });
        } else {
            timer_.cancel();
            if (running_.empty()) signals_.cancel();
        }
    }

    void start(std::size_t i, launch::SlotLease lease) {
        CellOutcome& out = outcomes_[i];
        std::vector<std::string> args = {"run",      o_.recipe,          "--gpus",      std::to_string(o_.gpus_per_cell),
                                         "--out",    out.dir.string(),   "--timeout",   fmt::format("{}", o_.timeout_s),
                                         "--device", name_of(o_.device), "--precision", o_.precision};
        const int threads = std::max<int>(1, static_cast<int>(lease.slots().size()) / o_.gpus_per_cell);
        if (ledger_.kind() == Device::Kind::cpu) args.insert(args.end(), {"--threads", std::to_string(threads)});
        for (const auto& s : o_.sets) args.insert(args.end(), {"--set", s});
        for (const auto& [k, v] : out.params) args.insert(args.end(), {"--set", k + "=" + v});

        // set(), not env[...]: Boost 1.74's lookup behind operator[] reads past shorter entries.
        bp::environment env = boost::this_process::environment();
        env.set("LEVERS_GPUS", fmt::format("{}", fmt::join(lease.slots(), ",")));  // the cell does not queue again
        if (ledger_.kind() == Device::Kind::cuda) env.set("CUDA_VISIBLE_DEVICES", env.get("LEVERS_GPUS"));
        for (const char* v : {"LEVERS_RUN_DIR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LEVERS_SEGMENT",
                              "LEVERS_MICRO_BATCH", "LEVERS_GRAD_ACCUM"})
            if (env.find(v) != env.end()) env.erase(v);
        fmt::print("sweep: cell {:02} started ({}) on {} {}\n", i, describe_cell(out.params),
                   ledger_.kind() == Device::Kind::cpu ? "slot" : "GPU", fmt::join(lease.slots(), ","));
        std::fflush(stdout);

        auto cell = std::make_unique<Running>();
        cell->lease = std::move(lease);
        cell->start = std::chrono::steady_clock::now();
        cell->child = bp::child(bp::exe = o_.program, bp::args = args, env, bp::std_in < bp::null,
                                (bp::std_out & bp::std_err) > out.log.string(), launch::DieWithParent{{}, getpid(), SIGTERM}  /* a multi-rank cell's launcher cleans up */, io_,
                                bp::on_exit([this, i](int, const std::error_code&) { finished(i); }));
        running_[i] = std::move(cell);
    }

    void finished(std::size_t i) {
        if (!running_.count(i)) return;  // Boost.Process may report one exit twice
        // Kept until the sweep ends: a child must not be destroyed inside its own exit handler.
        done_.push_back(std::move(running_.at(i)));
        running_.erase(i);
        Running& cell = *done_.back();
        CellOutcome& out = outcomes_[i];
        const int status = cell.child.native_exit_code();
        out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cell.start).count();
        out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        const fs::path result_file = out.dir / "result.json";
        if (out.exit_code == 0 && fs::exists(result_file)) {
            out.result = nlohmann::json::parse(read_file(result_file), nullptr, false);
            out.ok = !out.result.is_discarded();
            out.error.clear();
        }
        if (!out.ok) out.error = out.exit_code == 0 ? "finished without a result" : last_error_line(out.log);
        cell.lease.release();
        if (out.ok)
            fmt::print("sweep: cell {:02} finished in {:.1f} s\n", i, out.seconds);
        else
            fmt::print("sweep: cell {:02} FAILED (exit {}) after {:.1f} s: {}\n       log: {}\n", i, out.exit_code,
                       out.seconds, out.error, out.log.string());
        std::fflush(stdout);
        // Not from inside Boost.Process's exit handler: spawning there corrupts its list of children.
        asio::post(io_, [this] { start_ready(); });
    }

    const SweepOptions& o_;
    launch::SlotLedger ledger_;
    int need_ = 1;
    asio::io_context io_;
    asio::steady_timer timer_;
    asio::signal_set signals_;
    std::deque<std::size_t> queue_;
    std::map<std::size_t, std::unique_ptr<Running>> running_;
    std::vector<std::unique_ptr<Running>> done_;
    std::vector<CellOutcome> outcomes_;
    bool said_waiting_ = false;
    int interrupted_ = 0;
};

}  // namespace

std::string last_error_line(const fs::path& log) {
    std::ifstream in(log);
    std::string line, error, last;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        last = line;
        if (line.find("error:") != std::string::npos) error = line;
    }
    return error.empty() ? last : error;
}

std::vector<CellOutcome> run_sweep(const SweepOptions& options) {
    LEVERS_CHECK(!options.cells.empty(), "the sweep has no cells");
    LEVERS_CHECK(options.gpus_per_cell >= 1, "--gpus-per-cell must be >= 1, got {}", options.gpus_per_cell);
    LEVERS_CHECK(options.max_parallel >= 0, "--max-parallel must be >= 0 (0: as GPUs allow), got {}",
                 options.max_parallel);
    SweepRunner runner(options);
    auto outcomes = runner.run();
    if (runner.interrupted()) LEVERS_FAIL("the sweep was interrupted (signal {})", runner.interrupted());
    return outcomes;
}

std::vector<Result> run_map_cells(const MapCells& job) {
    SweepOptions o;
    o.recipe = job.recipe;
    o.cells = job.cells;
    o.sets = job.sets;
    o.program = fs::read_symlink("/proc/self/exe").string();
    o.device = job.device;
    o.precision = job.precision;
    o.dir = job.dir;
    auto outcomes = run_sweep(o);
    print_sweep_table(outcomes);
    write_sweep_report(o.dir, outcomes);
    std::vector<Result> results;
    for (const auto& c : outcomes) {
        Result r = c.ok ? c.result : Result::object();
        r["status"] = c.ok ? "ok" : "failed";
        if (!c.ok) {
            r["error"] = c.error;
            r["log"] = c.log.string();
        }
        results.push_back(std::move(r));
    }
    return results;
}

}  // namespace levers

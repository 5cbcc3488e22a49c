// The only file that includes Boost.Process (it is slow to compile).
#include "levers/launch/launcher.hpp"

#include "levers/core/error.hpp"
#include "levers/core/live_progress.hpp"
#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/shm_segment.hpp"
#include "levers/launch/child_setup.hpp"
#include "levers/launch/job_segment.hpp"

#include <boost/asio.hpp>
#include <boost/process.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <csignal>
#include <cstdio>
#include <deque>
#include <fstream>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace levers::launch {

namespace bp = boost::process;
namespace asio = boost::asio;

namespace {

constexpr std::size_t kLastLines = 20;

void close_on_exec(int fd) { fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC); }

std::string describe(int status) {
    if (WIFSIGNALED(status)) {
        const char* name = sigabbrev_np(WTERMSIG(status));
        return fmt::format("was killed by signal {} (SIG{})", WTERMSIG(status), name ? name : "?");
    }
    return fmt::format("exited with code {}", WEXITSTATUS(status));
}

// ", stopped (SIGSTOP)" for a process in the stopped state, else "".
std::string stopped_note(pid_t pid) {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');  // the command name may hold spaces
    const bool stopped = paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T';
    return stopped ? ", stopped (SIGSTOP)" : "";
}

struct Rank {
    int index = 0;
    std::unique_ptr<bp::async_pipe> out;
    asio::streambuf buffer;
    bp::child child;
    std::deque<std::string> last_lines;
    std::ofstream log;  // the rank's lines, unprefixed, when the job has a log directory
    bool exited = false, drained = false;
    int status = 0;
};

class Supervisor {
public:
    Supervisor(const LaunchOptions& o, const dist::ShmSegment& segment)
        : options_(o), segment_(segment), signals_(io_, SIGINT, SIGTERM), grace_timer_(io_) {}

    int run() {
        for (int r = 0; r < options_.ranks; ++r) spawn(r);
        signals_.async_wait([this](const boost::system::error_code& ec, int sig) { on_signal(ec, sig); });
        io_.run();
        return exit_code();
    }

    bool interrupted() const { return interrupted_ != 0; }

    // Why the job failed (empty if it did not fail because of a rank).
    std::string verdict() const {
        if (!failed_rank_) return {};
        const Rank& r = *ranks_[static_cast<std::size_t>(*failed_rank_)];
        return stall_.empty() ? fmt::format("rank {} {}", r.index, describe(r.status)) : stall_;
    }

private:
    void spawn(int r) {
        auto rank = std::make_unique<Rank>();
        rank->index = r;
        rank->out = std::make_unique<bp::async_pipe>(io_);
        close_on_exec(rank->out->native_source());
        close_on_exec(rank->out->native_sink());
        // set(), not env[...]: Boost 1.74's lookup behind operator[] reads past shorter entries.
        bp::environment env = boost::this_process::environment();
        env.set("RANK", std::to_string(r));
        env.set("WORLD_SIZE", std::to_string(options_.ranks));
        env.set("LOCAL_RANK", std::to_string(r));
        env.set("LOCAL_WORLD_SIZE", std::to_string(options_.ranks));
        env.set("LEVERS_SEGMENT", segment_.name());
        env.set("LEVERS_JOB_ID", segment_.name());
        env.set("LEVERS_DEVICE", name_of(options_.device));
        if (!options_.cuda_gpus.empty())
            env.set("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(options_.cuda_gpus, ",")));
        env.set("LEVERS_THREADS", std::to_string(options_.threads_per_rank));
        env.set("LEVERS_TIMEOUT_MS", std::to_string(options_.timeout.count()));
        env.set("OMP_NUM_THREADS", std::to_string(options_.threads_per_rank));
        env.set("LEVERS_LIVE_PROGRESS", options_.live_progress ? "1" : "0");
        for (const auto& [name, value] : options_.env) env.set(name, value);
        if (!options_.log_dir.empty()) {
            rank->log.open(options_.log_dir / fmt::format("rank{}.log", r), std::ios::app);
            LEVERS_CHECK(rank->log.is_open(), "cannot open the log of rank {} in {}", r, options_.log_dir.string());
        }
        Rank* raw = rank.get();
        rank->child = bp::child(
            bp::exe = options_.program, bp::args = options_.args, env, bp::std_in < bp::null,
            (bp::std_out & bp::std_err) > *rank->out, DieWithParent{{}, getpid(), SIGKILL}, io_,
            bp::on_exit([this, raw](int, const std::error_code&) { on_exit(*raw); }));
        ranks_.push_back(std::move(rank));
        read_lines(*raw);
    }

    void read_lines(Rank& r) {
        asio::async_read_until(*r.out, r.buffer, '\n', [this, &r](const boost::system::error_code& ec, std::size_t) {
            std::istream in(&r.buffer);
            std::string line;
            while (r.buffer.size() > 0 && (ec || std::memchr(asio::buffer_cast<const char*>(r.buffer.data()), '\n',
                                                              r.buffer.size()))) {
                if (!std::getline(in, line)) break;
                emit(r, line);
            }
            if (ec) {
                r.drained = true;
                maybe_finish();
                return;
            }
            read_lines(r);
        });
    }

    void emit(Rank& r, const std::string& line) {
        if (!line.empty() && line[0] == kProgressMark) {  // rank 0's live line: drawn in place, not kept
            if (options_.live_progress && r.index == 0) {
                fmt::print("\r\x1b[K[rank 0] {}", line.substr(1));
                std::fflush(stdout);
                live_shown_ = true;
            }
            return;
        }
        if (live_shown_) {
            fmt::print("\r\x1b[K");  // the next progress update redraws it below
            live_shown_ = false;
        }
        r.last_lines.push_back(line);
        if (r.last_lines.size() > kLastLines) r.last_lines.pop_front();
        if (r.log.is_open()) r.log << line << '\n' << std::flush;
        if (options_.all_output || r.index == 0) {
            fmt::print("[rank {}] {}\n", r.index, line);
            std::fflush(stdout);
        }
    }

    void on_exit(Rank& r) {
        r.exited = true;
        r.status = r.child.native_exit_code();
        const bool failed = !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
        if (failed && !failed_rank_ && !interrupted_) {
            failed_rank_ = r.index;
            // A rank that timed out waiting names the ones it waited for: the
            // verdict is about them, the stalled ones, not the one that gave up.
            const auto state = dist::ShmBackend::abort_state(JobSegment::group_memory(segment_.data()));
            if (state.by >= 0 && !state.stalled.empty()) {
                const Rank& s = *ranks_[static_cast<std::size_t>(state.stalled.front())];
                stall_ = fmt::format("rank {} stalled in a collective{}: {}", s.index, stopped_note(s.child.id()),
                                     state.reason);
                failed_rank_ = s.index;
                fmt::print(stderr, "levers: {}; stopping the job\n", stall_);
            } else {
                fmt::print(stderr, "levers: rank {} {}; stopping the job\n", r.index, describe(r.status));
            }
            dist::ShmBackend::abort_group(JobSegment::group_memory(segment_.data()),
                                          fmt::format("rank {} {}", r.index, describe(r.status)));
            stop_all(SIGTERM);
        }
        maybe_finish();
    }

    void on_signal(const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (interrupted_) {
            stop_all(SIGKILL);  // a second Ctrl-C: no more waiting
        } else {
            interrupted_ = sig;
            fmt::print(stderr, "levers: {} received; stopping {} ranks\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                       options_.ranks);
            dist::ShmBackend::abort_group(JobSegment::group_memory(segment_.data()), "the job was interrupted");
            stop_all(sig);
        }
        signals_.async_wait([this](const boost::system::error_code& e, int s) { on_signal(e, s); });
    }

    // Sends `sig` to every running rank; anything still running after the grace period gets SIGKILL.
    void stop_all(int sig) {
        for (auto& r : ranks_)
            if (!r->exited) ::kill(r->child.id(), sig);
        if (sig == SIGKILL || stopping_) return;
        stopping_ = true;
        grace_timer_.expires_after(options_.grace);
        grace_timer_.async_wait([this](const boost::system::error_code& ec) {
            if (!ec)
                for (auto& r : ranks_)
                    if (!r->exited) ::kill(r->child.id(), SIGKILL);
        });
    }

    void maybe_finish() {
        for (auto& r : ranks_)
            if (!r->exited || !r->drained) return;
        if (live_shown_) fmt::print("\r\x1b[K");
        live_shown_ = false;
        signals_.cancel();
        grace_timer_.cancel();
    }

    int exit_code() const {
        if (interrupted_) return 128 + interrupted_;
        if (failed_rank_) {
            const Rank& r = *ranks_[static_cast<std::size_t>(*failed_rank_)];
            std::string tail;
            for (const auto& line : r.last_lines) tail += "    " + line + "\n";
            fmt::print(stderr, "levers: job failed: {}. Its last lines:\n{}", verdict(),
                       tail.empty() ? "    (none)\n" : tail);
            return 1;
        }
        for (const auto& r : ranks_)
            if (!(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)) return 1;
        return 0;
    }

    const LaunchOptions& options_;
    const dist::ShmSegment& segment_;
    asio::io_context io_;
    asio::signal_set signals_;
    asio::steady_timer grace_timer_;
    std::vector<std::unique_ptr<Rank>> ranks_;
    std::optional<int> failed_rank_;
    std::string stall_;  // set when the job failed because a rank stalled
    int interrupted_ = 0;
    bool stopping_ = false;
    bool live_shown_ = false;  // a progress line is on the console, without its newline
};

}  // namespace

LaunchResult launch(const LaunchOptions& options) {
    LEVERS_CHECK(options.ranks >= 1, "a job needs at least one rank, got {}", options.ranks);
    dist::ShmSegment::sweep_stale();
    const std::size_t bytes = JobSegment::bytes(options.ranks, options.slot_bytes);
    auto segment = dist::ShmSegment::create(dist::ShmSegment::unique_name(), bytes);
    JobSegment::initialize(segment.data(), bytes, options.ranks, options.slot_bytes);
    LaunchResult out;
    Supervisor supervisor(options, segment);
    out.exit_code = supervisor.run();
    out.result = JobSegment::read_result(segment.data());
    out.interrupted = supervisor.interrupted();
    out.failure = out.interrupted ? std::string() : supervisor.verdict();
    return out;  // the segment's name is removed here
}

}  // namespace levers::launch

#include "levers/launch/slot_ledger.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/core/split.hpp"
#include "levers/core/threads.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace levers::launch {

namespace fs = std::filesystem;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

// Opens (creating, readable and writable by every user) a file to lock; -1 on failure.
int open_lock_file(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) ::fchmod(fd, 0666);  // despite the umask; fails harmlessly on another user's file
    return fd;
}

// True if someone holds an exclusive lock on `path` right now.
bool is_locked(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);
    return locked;
}

nlohmann::json read_json(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string text(4096, '\0');
    const ssize_t got = ::read(fd, text.data(), text.size());
    ::close(fd);
    text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
    return nlohmann::json::parse(text, nullptr, false);  // discarded (not an exception) if half-written
}

void write_json(int fd, const nlohmann::json& j) {
    const std::string text = j.dump();
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
        // The lock is what matters; the note is only for people asking who holds it.
    }
}

void make_shared_dir(const fs::path& dir) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return;
    fs::create_directories(dir, ec);
    LEVERS_CHECK(fs::is_directory(dir), "cannot create the slot ledger directory {}: {} (set LEVERS_LEDGER_DIR)",
                 dir.string(), ec.message());
    ::chmod(dir.c_str(), 01777);  // every user's jobs share the node's slots
}

std::string plural(int n, Device::Kind kind) { return fmt::format("{} {}{}", n, slot_unit(kind), n == 1 ? "" : "s"); }

}  // namespace

SlotLease::SlotLease(SlotLease&& o) noexcept : slots_(std::move(o.slots_)), fds_(std::move(o.fds_)) {
    o.slots_.clear();
    o.fds_.clear();
}

SlotLease& SlotLease::operator=(SlotLease&& o) noexcept {
    if (this != &o) {
        release();
        slots_ = std::move(o.slots_);
        fds_ = std::move(o.fds_);
        o.slots_.clear();
        o.fds_.clear();
    }
    return *this;
}

SlotLease::~SlotLease() { release(); }

void SlotLease::release() {
    for (int fd : fds_) {
        if (::ftruncate(fd, 0) != 0) {
            // Closing frees the lock whatever the note says.
        }
        ::close(fd);
    }
    fds_.clear();
    slots_.clear();
}

SlotLedger::SlotLedger(fs::path dir, Device::Kind kind, std::vector<int> slots)
    : dir_(std::move(dir)), kind_(kind), slots_(std::move(slots)) {
    make_shared_dir(dir_);
    make_shared_dir(dir_ / "waiting");
}

SlotLedger SlotLedger::for_node(int cuda_gpus) {
    fs::path dir;
    if (const char* d = env::get("LEVERS_LEDGER_DIR"))
        dir = d;
    else
        dir = ::access("/run/lock", W_OK) == 0 ? fs::path("/run/lock/levers-gpus") : fs::path("/tmp/levers-gpus");
    if (cuda_gpus > 0)
        return SlotLedger(dir, Device::Kind::cuda,
                          visible_cuda_gpus(cuda_gpus, env::get_even_empty("CUDA_VISIBLE_DEVICES")));
    int slots = available_cores();
    if (const char* s = env::get("LEVERS_CPU_SLOTS")) {
        char* end = nullptr;
        const long v = std::strtol(s, &end, 10);
        LEVERS_CHECK(*end == '\0' && v >= 1 && v <= 4096, "LEVERS_CPU_SLOTS must be a positive integer, got '{}'", s);
        slots = static_cast<int>(v);
    }
    std::vector<int> ids(static_cast<std::size_t>(slots));
    for (int i = 0; i < slots; ++i) ids[static_cast<std::size_t>(i)] = i;
    return SlotLedger(dir, Device::Kind::cpu, ids);
}

fs::path SlotLedger::lock_path(int slot) const { return dir_ / fmt::format("{}-{}.lock", name_of(kind_), slot); }

std::optional<SlotLease> SlotLedger::take(int n, const std::string& job) {
    SlotLease lease;
    for (int slot : slots_) {
        if (static_cast<int>(lease.slots_.size()) == n) break;
        int fd = open_lock_file(lock_path(slot));
        LEVERS_CHECK(fd >= 0, "cannot open the slot lock {}: {}", lock_path(slot).string(), std::strerror(errno));
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            ::close(fd);
            continue;
        }
        lease.fds_.push_back(fd);
        lease.slots_.push_back(slot);
    }
    if (static_cast<int>(lease.slots_.size()) < n) return std::nullopt;  // the lease's destructor frees what it took
    for (int fd : lease.fds_) write_json(fd, {{"job", job}, {"pid", static_cast<long>(::getpid())}});
    return lease;
}

std::optional<SlotLease> SlotLedger::try_acquire(int n, const std::string& job) {
    if (!waiters().empty()) return std::nullopt;  // first come, first served
    return take(n, job);
}

SlotLease SlotLedger::acquire(int n, const std::string& job, bool wait,
                              const std::function<void(const std::string&)>& say) {
    LEVERS_CHECK(n >= 1, "a job needs at least one {}, asked for {}", slot_unit(kind_), n);
    LEVERS_CHECK(n <= static_cast<int>(slots_.size()), "the job needs {} but this node has {}{}", plural(n, kind_),
                 slots_.size(), kind_ == Device::Kind::cuda ? " usable (CUDA_VISIBLE_DEVICES limits them)" : "");
    if (auto lease = try_acquire(n, job)) return std::move(*lease);
    const std::string busy = busy_message(n);
    LEVERS_CHECK(wait, "{} (--no-wait: not waiting)", busy);

    // Queue: a ticket named by the time, locked while this process waits.
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::string ticket_name = fmt::format("{:020}-{}.ticket", std::chrono::nanoseconds(now).count(), ::getpid());
    const fs::path ticket = dir_ / "waiting" / ticket_name;
    int ticket_fd = open_lock_file(ticket);
    LEVERS_CHECK(ticket_fd >= 0 && ::flock(ticket_fd, LOCK_EX | LOCK_NB) == 0, "cannot queue in the slot ledger at {}",
                 ticket.string());
    write_json(ticket_fd, {{"job", job}, {"pid", static_cast<long>(::getpid())}, {"GPUs", n}});
    struct TicketGuard {
        int fd;
        fs::path path;
        ~TicketGuard() {
            std::error_code ec;
            fs::remove(path, ec);
            ::close(fd);
        }
    } guard{ticket_fd, ticket};

    say(busy);
    for (;;) {
        std::this_thread::sleep_for(kPoll);
        // My turn once no live ticket is older than mine.
        bool first = true;
        for (const auto& e : fs::directory_iterator(dir_ / "waiting")) {
            const std::string name = e.path().filename().string();
            if (name < ticket_name && is_locked(e.path())) first = false;
        }
        if (!first) continue;
        if (auto lease = take(n, job)) return std::move(*lease);
    }
}

std::vector<SlotHolder> SlotLedger::holders() const {
    std::vector<SlotHolder> out;
    for (int slot : slots_) {
        if (!is_locked(lock_path(slot))) continue;
        const auto j = read_json(lock_path(slot));
        SlotHolder h{slot, "?", 0};
        if (j.is_object()) {
            h.job = j.value("job", "?");
            h.pid = j.value("pid", 0L);
        }
        out.push_back(h);
    }
    return out;
}

std::vector<Waiter> SlotLedger::waiters() const {
    std::vector<std::pair<std::string, Waiter>> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "waiting", ec)) {
        if (!is_locked(e.path())) {
            // A waiter that died: its ticket goes (another user's stays, harmlessly).
            fs::remove(e.path(), ec);
            continue;
        }
        const auto j = read_json(e.path());
        Waiter w;
        if (j.is_object()) {
            w.job = j.value("job", "?");
            w.pid = j.value("pid", 0L);
            w.slots = j.value("GPUs", 0);  // the tickets' key, kept for jobs of earlier versions
        }
        found.emplace_back(e.path().filename().string(), w);
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Waiter> out;
    for (auto& f : found) out.push_back(f.second);
    return out;
}

std::string SlotLedger::busy_message(int n) const {
    const auto held = holders();
    std::string who;
    for (const auto& h : held) who += fmt::format("{}{} {}: job '{}' (pid {})", who.empty() ? "" : ", ",
                                                 kind_ == Device::Kind::cpu ? "slot" : "GPU", h.slot, h.job, h.pid);
    std::string msg = fmt::format("waiting for {} ({} of {} free)", plural(n, kind_), slots_.size() - held.size(),
                                  slots_.size());
    if (!who.empty()) msg += "; held by " + who;
    const auto queued = waiters();
    if (!queued.empty()) msg += fmt::format("; {} job{} queued before", queued.size(), queued.size() == 1 ? "" : "s");
    return msg;
}

SlotLease& job_lease() {
    static SlotLease lease;
    return lease;
}

std::vector<int> visible_cuda_gpus(int count, const char* cuda_visible_devices) {
    std::vector<int> ids;
    if (cuda_visible_devices == nullptr) {
        for (int i = 0; i < count; ++i) ids.push_back(i);
        return ids;
    }
    if (*cuda_visible_devices == '\0') return ids;  // set but empty: no GPU
    for (const auto& item : split(cuda_visible_devices)) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        LEVERS_CHECK(!item.empty() && *end == '\0' && v >= 0 && v < count,
                     "CUDA_VISIBLE_DEVICES entry '{}' is not a GPU index of this node (0..{}); levers reads indices, "
                     "not UUIDs",
                     item, count - 1);
        if (std::find(ids.begin(), ids.end(), static_cast<int>(v)) == ids.end()) ids.push_back(static_cast<int>(v));
    }
    return ids;
}

}  // namespace levers::launch

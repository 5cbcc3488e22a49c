#include "levers/distributed/shm_segment.hpp"

#include "levers/core/error.hpp"

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/permissions.hpp>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <unistd.h>

namespace levers::dist {

namespace bip = boost::interprocess;

ShmSegment::ShmSegment(std::string name, bip::mapped_region region, bool owner)
    : name_(std::move(name)), region_(std::move(region)), owner_(owner) {}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : name_(std::move(o.name_)), region_(std::move(o.region_)), owner_(o.owner_) {
    o.owner_ = false;
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
    if (this != &o) {
        remove();
        name_ = std::move(o.name_);
        region_ = std::move(o.region_);
        owner_ = o.owner_;
        o.owner_ = false;
    }
    return *this;
}

ShmSegment::~ShmSegment() { remove(); }

void ShmSegment::remove() {
    if (owner_) bip::shared_memory_object::remove(name_.c_str());
    owner_ = false;
}

std::string ShmSegment::unique_name() {
    std::random_device rd;
    const unsigned long long bits = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
    return fmt::format("levers-{}-{:016x}", getpid(), bits);
}

int ShmSegment::sweep_stale() {
    int removed = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with("levers-")) continue;
        const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + 7, nullptr, 10));
        if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) removed += bip::shared_memory_object::remove(name.c_str());
    }
    return removed;
}

ShmSegment ShmSegment::create(const std::string& name, std::size_t bytes) {
    try {
        bip::permissions owner_only(0600);
        bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, owner_only);
        shm.truncate(static_cast<bip::offset_t>(bytes));  // new pages read as zeros
        return ShmSegment(name, bip::mapped_region(shm, bip::read_write), true);
    } catch (const bip::interprocess_exception& e) {
        LEVERS_FAIL("cannot create shared-memory segment '{}' of {} bytes: {}", name, bytes, e.what());
    }
}

ShmSegment ShmSegment::open(const std::string& name) {
    try {
        bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
        return ShmSegment(name, bip::mapped_region(shm, bip::read_write), false);
    } catch (const bip::interprocess_exception& e) {
        LEVERS_FAIL("cannot open shared-memory segment '{}': {}", name, e.what());
    }
}

}  // namespace levers::dist

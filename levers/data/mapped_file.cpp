#include "levers/data/mapped_file.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace levers::data {

namespace fs = std::filesystem;

MappedFile MappedFile::open(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    LEVERS_CHECK(fd >= 0, "{}: cannot be opened: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        LEVERS_FAIL("{}: cannot be read: {}", path.string(), std::strerror(err));
    }
    MappedFile f;
    f.size_ = static_cast<std::size_t>(st.st_size);
    if (f.size_ == 0) {  // mmap refuses empty files: an empty buffer will do
        ::close(fd);
        f.data_ = std::shared_ptr<const std::byte>(new std::byte[1], [](const std::byte* p) { delete[] p; });
        return f;
    }
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping stays
    LEVERS_CHECK(p != MAP_FAILED, "{}: cannot be mapped: {}", path.string(), std::strerror(err));
    const std::size_t size = f.size_;
    f.data_ = std::shared_ptr<const std::byte>(static_cast<const std::byte*>(p),
                                               [size](const std::byte* q) { ::munmap(const_cast<std::byte*>(q), size); });
    return f;
}

void release_pages(const std::byte* data, std::size_t bytes) {
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: failure is harmless
}

fs::path cache_dir() {
    if (const char* d = env::get("LEVERS_CACHE")) return d;
    if (const char* x = env::get("XDG_CACHE_HOME")) return fs::path(x) / "levers";
    const char* home = env::get("HOME");
    return fs::path(home && *home ? home : ".") / ".cache" / "levers";
}

std::string file_signature(const fs::path& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    LEVERS_CHECK(!ec, "{}: no such file", path.string());
    const auto when = fs::last_write_time(path, ec).time_since_epoch().count();
    return fmt::format("{}:{}:{}", fs::absolute(path).string(), size, when);
}

fs::path cached_file(const std::string& key, const std::function<void(const fs::path&)>& make) {
    const fs::path dir = cache_dir();
    std::error_code ec;
    fs::create_directories(dir, ec);
    LEVERS_CHECK(!ec, "the data cache {} cannot be made: {} (set LEVERS_CACHE to a writable directory)", dir.string(),
                 ec.message());
    const fs::path path = dir / key;
    if (fs::exists(path, ec)) return path;
    // One process makes it; the others wait on the lock and then find it there.
    const fs::path lock_path = dir / (key + ".lock");
    const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    LEVERS_CHECK(lock >= 0, "{}: cannot be opened: {}", lock_path.string(), std::strerror(errno));
    while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
    }
    try {
        if (!fs::exists(path, ec)) {
            const fs::path tmp = dir / fmt::format("{}.{}.tmp", key, ::getpid());
            make(tmp);
            fs::rename(tmp, path);
        }
    } catch (...) {
        ::close(lock);
        throw;
    }
    ::close(lock);  // releases the lock
    return path;
}

}  // namespace levers::data

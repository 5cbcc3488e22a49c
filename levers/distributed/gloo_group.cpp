#include "levers/distributed/gloo_group.hpp"

#include "levers/core/error.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

namespace levers::dist {

namespace {

namespace fs = std::filesystem;

// liblevers_gloo.so beside this library, opened once.
void* gloo_library(std::string& error) {
    static void* handle = nullptr;
    static std::string why;
    static std::once_flag once;
    std::call_once(once, [] {
        Dl_info info{};
        fs::path path = "liblevers_gloo.so";
        if (dladdr(reinterpret_cast<void*>(&gloo_library), &info) && info.dli_fname)
            path = fs::path(info.dli_fname).parent_path() / "liblevers_gloo.so";
        std::error_code ec;
        if (!fs::exists(path, ec)) {
            why = "this build of levers has no Gloo backend (libgloo-dev was not found when it was configured; on "
                  "Debian: apt-get install libgloo-dev, then build again)";
            return;
        }
        handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char* e = dlerror();
            why = "the Gloo backend " + path.string() + " does not load: " + (e ? e : "?");
        }
    });
    error = why;
    return handle;
}

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(int rank, int world, Store& store, const std::string& prefix,
                                           const std::string& member, const std::string& host,
                                           const std::string& iface, std::chrono::milliseconds timeout) {
    std::string error;
    void* lib = gloo_library(error);
    LEVERS_CHECK(lib, "rank {}: CPU ranks on several nodes talk through Gloo, and {}", rank, error);
    auto make = reinterpret_cast<decltype(&levers_make_gloo_backend)>(dlsym(lib, "levers_make_gloo_backend"));
    LEVERS_CHECK(make, "rank {}: the Gloo backend has no levers_make_gloo_backend", rank);
    return std::unique_ptr<Backend>(
        make(rank, world, &store, prefix.c_str(), member.c_str(), host.c_str(), iface.c_str(),
             static_cast<long>(timeout.count())));
}

}  // namespace levers::dist

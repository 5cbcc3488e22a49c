#include "levers/core/device_runtime.hpp"

#include "levers/core/environment.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace levers {

namespace {

namespace fs = std::filesystem;

fs::path backend_path() {
    if (const char* given = env::get("LEVERS_CUDA_BACKEND")) return given;
    Dl_info info{};  // this library's own file: the backend is installed beside it
    if (dladdr(reinterpret_cast<void*>(&backend_path), &info) && info.dli_fname)
        return fs::path(info.dli_fname).parent_path() / "liblevers_cuda.so";
    return "liblevers_cuda.so";
}

struct Loaded {
    void* handle = nullptr;
    DeviceRuntime* runtime = nullptr;
    std::string error;
};

Loaded& loaded() {
    static Loaded l;
    static std::once_flag once;
    std::call_once(once, [] {
        const fs::path path = backend_path();
        std::error_code ec;
        if (!fs::exists(path, ec)) {
            l.error = "this build of levers has no CUDA backend (nvcc was not found when it was configured)";
            return;
        }
        // RTLD_GLOBAL: what the backend links (the CUDA runtime) is found once, by everyone.
        l.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (!l.handle) {
            const char* why = dlerror();
            l.error = std::string("the CUDA backend ") + path.string() + " does not load: " + (why ? why : "?");
            return;
        }
        auto entry = reinterpret_cast<DeviceRuntime* (*)()>(dlsym(l.handle, "levers_device_runtime"));
        if (!entry) {
            l.error = path.string() + " is not a levers GPU backend (no levers_device_runtime)";
            return;
        }
        l.runtime = entry();
    });
    return l;
}

}  // namespace

bool device_backend_installed() {
    std::error_code ec;
    return fs::exists(backend_path(), ec);
}

DeviceRuntime* device_runtime() { return loaded().runtime; }
const std::string& device_backend_error() { return loaded().error; }
void load_device_backend() { (void)loaded(); }

void* device_backend_symbol(const char* name) {
    Loaded& l = loaded();
    return l.handle ? dlsym(l.handle, name) : nullptr;
}

}  // namespace levers

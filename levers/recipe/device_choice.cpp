#include "levers/recipe/device_choice.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/launch/slot_ledger.hpp"

#include <algorithm>
#include <cstdlib>

namespace levers {

namespace {
std::string visible_devices_note() {
    const char* v = env::get_even_empty("CUDA_VISIBLE_DEVICES");
    return v ? fmt::format(" (CUDA_VISIBLE_DEVICES='{}')", v) : std::string();
}
}  // namespace

Device::Kind resolve_device(const std::string& flag, int ranks) {
    const auto named = kind_named(flag);
    LEVERS_CHECK(flag == "auto" || named, "--device must be auto, cpu or cuda, got '{}'", flag);
    if (named == Device::Kind::cpu) return Device::Kind::cpu;
    const int gpus = gpu_count();
    if (flag == "auto" && gpus == 0) return Device::Kind::cpu;
    LEVERS_CHECK(built_with_cuda(), "--device cuda: this build of levers has no CUDA backend (nvcc was not found when "
                 "it was configured); rebuild where the CUDA toolkit is installed, or use --device cpu");
    LEVERS_CHECK(gpus > 0, "--device cuda: no CUDA GPU is visible to this process{}; use --device cpu",
                 visible_devices_note());
    LEVERS_CHECK(ranks <= gpus, "--gpus {} asks for more GPUs than this node shows: {}{}", ranks, gpus,
                 visible_devices_note());
    return Device::Kind::cuda;
}

DType resolve_precision(const std::string& flag, Device::Kind device) {
    LEVERS_CHECK(flag == "f32" || flag == "bf16", "--precision must be f32 or bf16, got '{}'", flag);
    if (flag == "f32") return DType::f32;
    LEVERS_CHECK(device == Device::Kind::cuda, "--precision bf16 computes on GPUs only, and this run's device is {}; "
                 "use --precision f32 or --device cuda", name_of(device));
    return DType::bf16;
}

NodeSlots node_slots(Device::Kind device) {
    if (device == Device::Kind::cuda) return {gpu_count(), "GPUs"};
    return {static_cast<int>(launch::SlotLedger::for_node(0).slots().size()), "CPU slots"};
}

int runtime_index(int gpu) {
    const auto visible = launch::visible_cuda_gpus(node_gpu_count(), env::get_even_empty("CUDA_VISIBLE_DEVICES"));
    const auto it = std::find(visible.begin(), visible.end(), gpu);
    LEVERS_CHECK(it != visible.end(), "GPU {} is not visible to this process{}", gpu, visible_devices_note());
    return static_cast<int>(it - visible.begin());
}

}  // namespace levers

// The slot ledger: which job holds which slot of this node. A slot is what
// one rank computes on: a CUDA GPU, or, on a machine without GPUs, a CPU
// core (`recipe run` takes all of them, or ranks x --threads; a sweep cell
// takes one per rank). The user's knob stays `--gpus`: the ranks.
//
// Every levers process on the node shares it through one lock file per slot
// (flock, so a dead holder's lock frees itself). A job takes all the slots it
// needs at the same moment or none; jobs that must wait queue first come,
// first served, each holding a lock on its own ticket file so `recipe status`
// can list live waiters and stale tickets are swept. Lock files hold the
// holder's job name and pid as JSON for whoever asks who holds a slot.
//
// Where:  LEVERS_LEDGER_DIR, else /run/lock/levers-gpus (or /tmp/levers-gpus
//         without /run/lock): one directory for every user of the node, so
//         the directory is sticky and world-writable and lock files are 0666.
//         (Its name and the files' names and keys are those of earlier
//         versions, so jobs of both see each other.)
// Which:  CPU slots: LEVERS_CPU_SLOTS, else the cores this process may use.
//         CUDA GPUs: those CUDA_VISIBLE_DEVICES lists, else every GPU.
#pragma once

#include "levers/core/device.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace levers::launch {

// What a slot of `kind` is called in messages: "CPU slot" or "GPU".
inline const char* slot_unit(Device::Kind kind) { return kind == Device::Kind::cpu ? "CPU slot" : "GPU"; }

struct SlotHolder {
    int slot = 0;
    std::string job;
    long pid = 0;
};

struct Waiter {
    std::string job;
    long pid = 0;
    int slots = 0;  // how many it waits for
};

// Slots held by this process until release() or destruction.
class SlotLease {
public:
    SlotLease() = default;
    SlotLease(SlotLease&&) noexcept;
    SlotLease& operator=(SlotLease&&) noexcept;
    SlotLease(const SlotLease&) = delete;
    SlotLease& operator=(const SlotLease&) = delete;
    ~SlotLease();

    const std::vector<int>& slots() const { return slots_; }
    void release();

private:
    friend class SlotLedger;
    std::vector<int> slots_;
    std::vector<int> fds_;  // the held locks, one per slot
};

class SlotLedger {
public:
    // Slots of `kind` (CPU cores or CUDA GPUs): the ids this process may use.
    SlotLedger(std::filesystem::path dir, Device::Kind kind, std::vector<int> slots);
    // The ledger of this node as the environment describes it (see above).
    // cuda_gpus: how many CUDA GPUs the node has (0: use CPU slots).
    static SlotLedger for_node(int cuda_gpus = 0);

    // Takes n slots at once, or returns nothing if they are not free now or an
    // earlier job is queued for slots.
    std::optional<SlotLease> try_acquire(int n, const std::string& job);
    // Takes n slots, queueing until they are free together; `say` is told once
    // what the job waits for and who holds the slots. Throws levers::Error if
    // n is more than the ledger has, or, with wait false, if they are busy.
    SlotLease acquire(int n, const std::string& job, bool wait, const std::function<void(const std::string&)>& say);

    Device::Kind kind() const { return kind_; }
    const char* unit() const { return slot_unit(kind_); }
    const std::vector<int>& slots() const { return slots_; }
    const std::filesystem::path& dir() const { return dir_; }
    std::vector<SlotHolder> holders() const;  // live holders only
    std::vector<Waiter> waiters() const;      // live waiters, oldest first

private:
    std::filesystem::path lock_path(int slot) const;
    std::optional<SlotLease> take(int n, const std::string& job);
    std::string busy_message(int n) const;

    std::filesystem::path dir_;
    Device::Kind kind_;
    std::vector<int> slots_;
};

// The slots this process's job holds (empty until `recipe run` takes them); a
// recipe that sweeps from inside its run (Recipe::map) gives them up for its cells.
SlotLease& job_lease();

// The GPU ids CUDA_VISIBLE_DEVICES allows among `count` GPUs (all when the
// variable is unset). Throws levers::Error naming an entry that is not a GPU
// index of this node.
std::vector<int> visible_cuda_gpus(int count, const char* cuda_visible_devices);

}  // namespace levers::launch

// NCCL on emulated GPUs. The ranks are processes (one emulated GPU each)
// that meet in a POSIX shared-memory segment named by the unique id. A
// collective is done in turns of at most one slot's bytes: each rank puts
// its part in its own slot, all wait, each reads what it needs, all wait
// again. The sums go in rank order, so every rank gets the same bits.
// Collectives run when their stream gets to them (streams.cpp): a rank that
// queues one without waiting for the kernels that write its buffer sends
// what the buffer held before.
#include <nccl.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

namespace {

constexpr int kMaxRanks = 8;
constexpr std::size_t kSlotBytes = 1 << 20;
constexpr auto kPatience = std::chrono::seconds(120);  // a rank this late has died: the job is over

// The segment: this header, then one slot of kSlotBytes per rank.
struct alignas(64) Segment {
    std::atomic<int> joined;
    std::atomic<unsigned> arrived;
    std::atomic<unsigned long> generation;
};
std::size_t segment_bytes(int ranks) { return sizeof(Segment) + static_cast<std::size_t>(ranks) * kSlotBytes; }

struct Comm {
    std::string name;
    Segment* shared = nullptr;
    int ranks = 0, rank = 0;
    bool closed = false;  // destroyed or aborted: collectives still queued do nothing

    unsigned char* slot(int r) const { return reinterpret_cast<unsigned char*>(shared + 1) + r * kSlotBytes; }

    [[noreturn]] void gave_up(const char* what) const {
        std::fprintf(stderr, "emulated NCCL: rank %d of %d waited %lld s for the others %s; stopping\n", rank, ranks,
                     static_cast<long long>(kPatience.count()), what);
        std::abort();
    }

    void barrier() const {
        const unsigned long generation = shared->generation.load();
        if (shared->arrived.fetch_add(1) + 1 == static_cast<unsigned>(ranks)) {
            shared->arrived.store(0);
            shared->generation.fetch_add(1);
            return;
        }
        const auto start = std::chrono::steady_clock::now();
        while (shared->generation.load() == generation) {
            if (std::chrono::steady_clock::now() - start > kPatience) gave_up("in a collective");
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }
};

std::size_t bytes_of(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: case ncclUint8: return 1;
        case ncclFloat16: case ncclBfloat16: return 2;
        case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
        default: return 8;
    }
}

float bf16_value(const unsigned char* p) {
    std::uint32_t bits = 0;
    std::memcpy(reinterpret_cast<unsigned char*>(&bits) + 2, p, 2);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
void put_bf16(unsigned char* p, float f) {  // round to nearest even, as __float2bfloat16_rn
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1);
    std::memcpy(p, reinterpret_cast<unsigned char*>(&bits) + 2, 2);
}

// out[i] = the ranks' slots' i-th elements summed in rank order (averaged for ncclAvg).
template <class T, class Acc> void reduce(const Comm& c, std::size_t count, bool average, unsigned char* out) {
    for (std::size_t i = 0; i < count; ++i) {
        Acc sum = 0;
        for (int r = 0; r < c.ranks; ++r) {
            T v;
            std::memcpy(&v, c.slot(r) + i * sizeof(T), sizeof(T));
            sum += static_cast<Acc>(v);
        }
        const T result = static_cast<T>(average ? sum / c.ranks : sum);
        std::memcpy(out + i * sizeof(T), &result, sizeof(T));
    }
}
void reduce_bf16(const Comm& c, std::size_t count, bool average, unsigned char* out) {
    for (std::size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r = 0; r < c.ranks; ++r) sum += bf16_value(c.slot(r) + 2 * i);
        put_bf16(out + 2 * i, average ? sum / static_cast<float>(c.ranks) : sum);
    }
}

void all_reduce(const Comm& c, const unsigned char* send, unsigned char* recv, std::size_t count, ncclDataType_t t,
                bool average) {
    const std::size_t w = bytes_of(t), per_turn = kSlotBytes / w;
    for (std::size_t at = 0; at < count || at == 0; at += per_turn) {
        const std::size_t n = std::min(per_turn, count - at);
        std::memcpy(c.slot(c.rank), send + at * w, n * w);
        c.barrier();
        unsigned char* out = recv + at * w;
        switch (t) {
            case ncclFloat32: reduce<float, float>(c, n, average, out); break;
            case ncclFloat64: reduce<double, double>(c, n, average, out); break;
            case ncclBfloat16: reduce_bf16(c, n, average, out); break;
            case ncclInt32: reduce<std::int32_t, std::int64_t>(c, n, average, out); break;
            case ncclUint8: reduce<std::uint8_t, std::int64_t>(c, n, average, out); break;
            default: reduce<std::int64_t, std::int64_t>(c, n, average, out);
        }
        c.barrier();
        if (count == 0) break;
    }
}

void broadcast(const Comm& c, const unsigned char* send, unsigned char* recv, std::size_t bytes, int root) {
    for (std::size_t at = 0; at < bytes || at == 0; at += kSlotBytes) {
        const std::size_t n = std::min(kSlotBytes, bytes - at);
        if (c.rank == root) std::memcpy(c.slot(root), send + at, n);
        c.barrier();
        std::memcpy(recv + at, c.slot(root), n);
        c.barrier();
        if (bytes == 0) break;
    }
}

void all_gather(const Comm& c, const unsigned char* send, unsigned char* recv, std::size_t bytes) {
    for (std::size_t at = 0; at < bytes || at == 0; at += kSlotBytes) {
        const std::size_t n = std::min(kSlotBytes, bytes - at);
        std::memcpy(c.slot(c.rank), send + at, n);
        c.barrier();
        for (int r = 0; r < c.ranks; ++r) std::memcpy(recv + r * bytes + at, c.slot(r), n);
        c.barrier();
        if (bytes == 0) break;
    }
}

std::string segment_name(const ncclUniqueId& id) {
    std::string name = "/levers-emulated-nccl-";
    for (int i = 0; i < 8; ++i) name += "0123456789abcdef"[static_cast<unsigned char>(id.internal[i]) % 16];
    return name;
}

// A handle is a shared_ptr, so collectives still queued keep their communicator.
using Handle = std::shared_ptr<Comm>;
Comm* of(ncclComm_t comm) { return reinterpret_cast<Handle*>(comm)->get(); }

ncclResult_t queue(ncclComm_t comm, cudaStream_t stream, std::function<void(const Comm&)> collective) {
    if (!comm || of(comm)->closed) return ncclInvalidArgument;
    Handle c = *reinterpret_cast<Handle*>(comm);
    levers::emulation::enqueue(stream, [c, collective = std::move(collective)] {
        if (!c->closed) collective(*c);
    });
    return ncclSuccess;
}

// Closed, the communicator does nothing more; it is freed when no queued collective names it.
ncclResult_t shut(ncclComm_t comm) {
    Comm* c = of(comm);
    c->closed = true;
    munmap(c->shared, segment_bytes(c->ranks));
    delete reinterpret_cast<Handle*>(comm);
    return ncclSuccess;
}
bool reducible(ncclRedOp_t op) { return op == ncclSum || op == ncclAvg; }

}  // namespace

extern "C" {
ncclResult_t ncclGetVersion(int* version) {
    *version = 22803;  // 2.28.3: past the RTX PRO 6000 quirk's minimum
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    std::random_device random;
    for (char& byte : id->internal) byte = static_cast<char>(random());
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int ranks, ncclUniqueId id, int rank, ncclConfig_t*) {
    if (ranks < 1 || ranks > kMaxRanks || rank < 0 || rank >= ranks) {
        std::fprintf(stderr, "emulated NCCL: rank %d of %d asked for; it joins 1 to %d ranks\n", rank, ranks, kMaxRanks);
        return ncclInvalidArgument;
    }
    const std::string name = segment_name(id);
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) return ncclSystemError;
    void* memory = ftruncate(fd, static_cast<off_t>(segment_bytes(ranks))) == 0
                       ? mmap(nullptr, segment_bytes(ranks), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : MAP_FAILED;
    close(fd);
    if (memory == MAP_FAILED) return ncclSystemError;
    // A new segment is zeros: no one has joined or arrived.
    auto c = std::make_shared<Comm>(Comm{name, static_cast<Segment*>(memory), ranks, rank});
    c->shared->joined.fetch_add(1);
    const auto start = std::chrono::steady_clock::now();
    while (c->shared->joined.load() < ranks) {
        if (std::chrono::steady_clock::now() - start > kPatience) c->gave_up("to join");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    c->barrier();                               // everyone has the segment open ...
    if (rank == 0) shm_unlink(c->name.c_str());  // ... so its name can go: nothing is left behind
    *comm = reinterpret_cast<ncclComm_t>(new Handle(std::move(c)));
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    levers::emulation::finish_all();  // NCCL completes what was queued first
    return shut(comm);
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return shut(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* result) {
    *result = ncclSuccess;
    return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "emulated NCCL refused the call"; }
ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    if (!reducible(op)) return ncclInvalidArgument;
    return queue(comm, stream, [=](const Comm& c) {
        all_reduce(c, static_cast<const unsigned char*>(send), static_cast<unsigned char*>(recv), count, t,
                   op == ncclAvg);
    });
}
ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    if (root < 0 || root >= of(comm)->ranks) return ncclInvalidArgument;
    return queue(comm, stream, [=](const Comm& c) {
        broadcast(c, static_cast<const unsigned char*>(send), static_cast<unsigned char*>(recv), count * bytes_of(t), root);
    });
}
ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
    return queue(comm, stream, [=](const Comm& c) {
        all_gather(c, static_cast<const unsigned char*>(send), static_cast<unsigned char*>(recv), count * bytes_of(t));
    });
}
}  // extern "C"

// NCCL on the emulated card: one rank, so every collective is a copy (the
// sum or average of one rank's buffer is that buffer). More ranks are
// refused: they need cards.
#include <nccl.h>

#include <cstdio>
#include <cstring>

namespace {
std::size_t bytes_of(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: case ncclUint8: return 1;
        case ncclFloat16: case ncclBfloat16: return 2;
        case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
        default: return 8;
    }
}
ncclResult_t copy(const void* from, void* to, std::size_t count, ncclDataType_t t) {
    if (from != to) std::memmove(to, from, count * bytes_of(t));
    return ncclSuccess;
}
}  // namespace

extern "C" {
ncclResult_t ncclGetVersion(int* version) {
    *version = 22803;  // 2.28.3: past the RTX PRO 6000 quirk's minimum
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    std::memset(id, 1, sizeof *id);
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int ranks, ncclUniqueId, int rank, ncclConfig_t*) {
    if (ranks != 1 || rank != 0) {
        std::fprintf(stderr, "emulated NCCL: %d ranks asked for; the emulated card runs one\n", ranks);
        return ncclInvalidUsage;
    }
    *comm = levers::emulation::make_handle<ncclComm_t>();
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    levers::emulation::drop_handle(comm);
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* result) {
    *result = ncclSuccess;
    return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "emulated NCCL refused the call"; }
ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t t, ncclRedOp_t, ncclComm_t,
                           cudaStream_t) {
    return copy(send, recv, count, t);
}
ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t t, int, ncclComm_t,
                           cudaStream_t) {
    return copy(send, recv, count, t);
}
ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t t, ncclComm_t, cudaStream_t) {
    return copy(send, recv, count, t);
}
}  // extern "C"

// Streams and events on the emulated GPU. A stream is a queue of work that
// runs only when something waits for it: the host (finish, finish_all) or
// another stream's wait on an event recorded here, which runs this queue up
// to the event's place and no further. So work on two streams runs in the
// order their events and the host's waits impose, and in no other: a
// collective that does not wait for the kernels writing its buffer reads it
// before they have run.
#include "emulated_gpu.hpp"

#include <deque>
#include <mutex>
#include <vector>

namespace levers::emulation {

namespace {

struct Stream {
    bool blocking = true;  // waits for, and is waited for by, the legacy default stream
    std::deque<std::function<void()>> queue;
    unsigned long long queued = 0, done = 0;  // work items so far
};

struct Streams {
    std::recursive_mutex mutex;  // work may queue a wait on another stream while it runs
    Stream legacy;
    std::vector<Stream*> all{&legacy};  // kept after cudaStreamDestroy: events may still name them
};
Streams& streams() {
    static Streams& s = *new Streams;  // never destroyed: queued work may outlive static destructors
    return s;
}

Stream& of(cudaStream_t s) { return s ? *reinterpret_cast<Stream*>(s) : streams().legacy; }

// Runs `s`'s work up to its `position`-th item (counted from its first).
void run_until(Stream& s, unsigned long long position) {
    std::lock_guard lock(streams().mutex);
    while (s.done < position) {
        std::function<void()> work = std::move(s.queue.front());
        s.queue.pop_front();
        ++s.done;
        work();
    }
}

void push(Stream& s, std::function<void()> work) {
    s.queue.push_back(std::move(work));
    ++s.queued;
}

// Work queued on `s` waits for what `other` has queued so far.
void wait_for(Stream& s, Stream& other) {
    if (other.queued > other.done) push(s, [&other, at = other.queued] { run_until(other, at); });
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
    Streams& all = streams();
    std::lock_guard lock(all.mutex);
    Stream& s = of(stream);
    if (&s == &all.legacy) {
        for (Stream* other : all.all)
            if (other != &s && other->blocking) wait_for(s, *other);
    } else if (s.blocking) {
        wait_for(s, all.legacy);
    }
    push(s, std::move(work));
}

void finish(cudaStream_t stream) {
    Stream& s = of(stream);
    run_until(s, s.queued);
}

void finish_all() {
    Streams& all = streams();
    std::lock_guard lock(all.mutex);
    for (bool pending = true; pending;) {
        pending = false;
        for (Stream* s : all.all) {
            pending |= s->queued > s->done;
            run_until(*s, s->queued);
        }
    }
}

}  // namespace levers::emulation

namespace {
using levers::emulation::finish;
using levers::emulation::of;
using levers::emulation::Stream;
using levers::emulation::streams;

// Where an event was last recorded: a place in one stream's queue.
struct Event {
    Stream* stream = nullptr;
    unsigned long long position = 0;
};
}  // namespace

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    auto* stream = new Stream;
    stream->blocking = (flags & cudaStreamNonBlocking) == 0;
    std::lock_guard lock(streams().mutex);
    streams().all.push_back(stream);
    *s = reinterpret_cast<cudaStream_t>(stream);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
// A GPU finishes a destroyed stream's work; here it runs now.
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    finish(s);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    finish(s);
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    finish(s);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    const Event recorded = *reinterpret_cast<Event*>(e);
    if (recorded.stream)
        levers::emulation::enqueue(s, [recorded] { levers::emulation::run_until(*recorded.stream, recorded.position); });
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    *e = reinterpret_cast<cudaEvent_t>(new Event);
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete reinterpret_cast<Event*>(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    std::lock_guard lock(streams().mutex);
    Stream& stream = of(s);
    *reinterpret_cast<Event*>(e) = {&stream, stream.queued};
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    const Event recorded = *reinterpret_cast<Event*>(e);
    if (recorded.stream) levers::emulation::run_until(*recorded.stream, recorded.position);
    return cudaSuccess;
}
// The emulated GPU runs queued work when it is waited for: an event queried is reached.
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
    *ms = 0;  // the emulated GPU has no clock worth reading
    return cudaSuccess;
}

}  // extern "C"

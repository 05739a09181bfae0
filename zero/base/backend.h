// What differs between the two builds below the model: memory, copies, streams
// and events. The CUDA build (nvcc) defines ZERO_CUDA; the CPU build (g++, or
// -DZERO_CPU) runs every "stream" synchronously on the calling thread, so
// events and waits order nothing (checking mode only checks the order they
// would give on a GPU: zero/base/stream_check.h) and copies are memcpy.
#pragma once

#include <cstddef>
#include <cstring>

#include "zero/base/common.h"
#include "zero/base/ops.h"
#include "zero/base/stream_check.h"

#if defined(__CUDACC__) && !defined(ZERO_CPU)
#define ZERO_CUDA 1
#endif

// A copy (src null: a memset) as the recorder sees it (zero/base/ops.h):
// "zero", "copy" on the device, "to_host" or "to_device" across the arenas, by
// its bytes; `run` queues it on its stream, `finish` waits for the stream. True
// in a dry run: then nothing moves.
template <typename Run, typename Finish>
bool record_copy(const void* src, const void* dst, size_t bytes, Lane lane, Run&& run, Finish&& finish) {
    OpRecorder* r = tl_recorder;
    if (!r) return false;
    StepOp op;
    const bool from_device = src && r->on_device(src), to_device = r->on_device(dst);
    op.kind = !src ? "zero" : from_device == to_device ? "copy" : from_device ? "to_host" : "to_device";
    op.lane = r->capture ? Lane::Compute : lane, op.bytes = bytes, op.dims = {(long)bytes};
    op.acc = {reads_bytes(src, bytes), writes_bytes((void*)dst, bytes)};
    const bool replayable = r->capture && r->known(dst) && (!src || r->known(src));  // (a read-back's vector dies)
    if (replayable) r->add(op, run, finish);
    else r->add(op);
    return !r->capture;
}

#ifdef ZERO_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#define cudaCheck(call)                                                                                  \
    do {                                                                                                 \
        cudaError_t err_ = (call);                                                                       \
        if (err_ != cudaSuccess) fail("CUDA error at %s:%d: %s", __FILE__, __LINE__, cudaGetErrorString(err_)); \
    } while (0)

using Stream = cudaStream_t;
using Event = cudaEvent_t;

// A dry run (zero/base/ops.h) makes no CUDA call: its streams are a lane's
// number, its events a record of the op they follow.
struct DryEvent {
    int op = -1;
};
inline Lane stream_lane(Stream s) { return dry_recorder() ? (Lane)((uintptr_t)s - 0x10) : Lane::Compute; }
inline DryEvent* dry_event(Event e) { return reinterpret_cast<DryEvent*>(e); }

inline Stream stream_create(const char* name = "a stream") {
    if (dry_recorder()) return reinterpret_cast<Stream>((uintptr_t)(0x10 + (int)lane_named(name)));
    Stream s;
    cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}
inline void stream_destroy(Stream s) {
    if (!dry_recorder()) cudaCheck(cudaStreamDestroy(s));
}
inline void stream_sync(Stream s) {
    if (OpRecorder* r = dry_recorder()) return r->host_wait(r->last_on(stream_lane(s)));
    cudaCheck(cudaStreamSynchronize(s));
}
inline Event event_create() {
    if (dry_recorder()) return reinterpret_cast<Event>(new DryEvent);
    Event e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}
inline void event_destroy(Event e) {
    if (dry_recorder()) return delete dry_event(e);
    cudaCheck(cudaEventDestroy(e));
}
inline void event_record(Event e, Stream s) {
    if (OpRecorder* r = dry_recorder()) return void(dry_event(e)->op = r->last_on(stream_lane(s)));
    cudaCheck(cudaEventRecord(e, s));
}
inline void stream_wait(Stream s, Event e) {
    if (OpRecorder* r = dry_recorder()) return r->wait(stream_lane(s), dry_event(e)->op);
    cudaCheck(cudaStreamWaitEvent(s, e, 0));
}
inline void event_sync(Event e) {
    if (OpRecorder* r = dry_recorder()) return r->host_wait(dry_event(e)->op);
    cudaCheck(cudaEventSynchronize(e));
}

inline void* device_malloc(size_t bytes) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    CHECK(err == cudaSuccess, "out of GPU memory allocating %.1f MiB: %s", bytes / 1048576.0, cudaGetErrorString(err));
    return p;
}
inline void device_free(void* p) { cudaCheck(cudaFree(p)); }
// page-locked host memory: the only kind the GPU can copy to and from
// asynchronously (plain memory in a dry run, which copies nothing)
inline void* host_malloc(size_t bytes) {
    if (dry_recorder()) return malloc(bytes ? bytes : 1);
    void* p = nullptr;
    cudaError_t err = cudaMallocHost(&p, bytes);
    CHECK(err == cudaSuccess, "cannot pin %.1f MiB of host memory: %s", bytes / 1048576.0, cudaGetErrorString(err));
    return p;
}
inline void host_free(void* p) {
    if (dry_recorder()) return free(p);
    cudaCheck(cudaFreeHost(p));
}

// checking mode is the CPU build's (zero/base/stream_check.h): nothing to check here
inline int stream_agent(Stream) { return -1; }
inline void check_on(Stream, const char*, std::initializer_list<Access>) {}
inline void check_on(Stream, const char*, const std::vector<Access>&) {}

inline void device_zero(void* p, size_t bytes, Stream s) {
    auto run = [=] { cudaCheck(cudaMemsetAsync(p, 0, bytes, s)); };
    if (!record_copy(nullptr, p, bytes, stream_lane(s), run, [=] { stream_sync(s); })) run();
}
inline void device_copy(void* dst, const void* src, size_t bytes, Stream s) {
    auto run = [=] { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s)); };
    if (!record_copy(src, dst, bytes, stream_lane(s), run, [=] { stream_sync(s); })) run();
}
#else
// The CPU build: a stream is just a name for "in order, now". In checking
// mode (zero/base/stream_check.h) streams and events are objects that carry
// the GPU's order for the checker; otherwise they are null and cost nothing.
struct CpuStream {
    StreamChecker* owner;  // checking mode's checker, or null
    int agent;
    Lane lane;  // a dry run's (zero/base/ops.h)
};
using Stream = CpuStream*;
struct CpuEvent {
    StreamChecker* owner;
    StreamChecker::Clock clock;  // the stream's clock at the last record
    int op = -1;                 // a dry run: the op it follows
};
using Event = CpuEvent*;

// the checker's agent of stream s on this thread's rank, or -1
inline int stream_agent(Stream s) { return s && tl_checker && s->owner == tl_checker ? s->agent : -1; }
inline bool checked(Event e) { return e && tl_checker && e->owner == tl_checker; }
inline Lane stream_lane(Stream s) { return s ? s->lane : Lane::Compute; }

inline Stream stream_create(const char* name = "a stream") {
    if (!tl_checker && !dry_recorder()) return nullptr;
    return new CpuStream{tl_checker, tl_checker ? tl_checker->add_agent(name) : -1, lane_named(name)};
}
inline void stream_destroy(Stream s) { delete s; }
inline void stream_sync(Stream s) {
    if (stream_agent(s) >= 0) tl_checker->sync_stream(s->agent);
    if (OpRecorder* r = dry_recorder()) r->host_wait(r->last_on(stream_lane(s)));
}
inline Event event_create() { return tl_checker || dry_recorder() ? new CpuEvent{tl_checker, {}, -1} : nullptr; }
inline void event_destroy(Event e) { delete e; }
inline void event_record(Event e, Stream s) {
    if (e && dry_recorder()) e->op = dry_recorder()->last_on(stream_lane(s));
    if (!checked(e)) return;
    e->clock = stream_agent(s) >= 0 ? tl_checker->record(s->agent) : tl_checker->now();
}
inline void stream_wait(Stream s, Event e) {
    if (e && dry_recorder()) dry_recorder()->wait(stream_lane(s), e->op);
    if (checked(e) && stream_agent(s) >= 0) tl_checker->wait(s->agent, e->clock);
}
inline void event_sync(Event e) {
    if (e && dry_recorder()) dry_recorder()->host_wait(e->op);
    if (checked(e)) tl_checker->sync(e->clock);
}

// "device" and "host" memory are both RAM here, kept apart only by accounting
inline void* aligned_malloc_or_fail(size_t bytes, const char* what) {
    void* p = nullptr;
    int err = posix_memalign(&p, 256, bytes == 0 ? 256 : bytes);
    CHECK(err == 0, "out of %s memory allocating %.1f MiB", what, bytes / 1048576.0);
    return p;
}
inline void* device_malloc(size_t bytes) { return aligned_malloc_or_fail(bytes, "device"); }
inline void device_free(void* p) { free(p); }
inline void* host_malloc(size_t bytes) { return aligned_malloc_or_fail(bytes, "host"); }
inline void host_free(void* p) { free(p); }

// an operation on stream s (the thread's own work when s is null)
template <typename Accesses>
void check_on_all(Stream s, const char* what, const Accesses& acc) {
    if (stream_agent(s) >= 0) tl_checker->issue(s->agent, what, acc);
    else if (tl_checker) tl_checker->host(what, acc);
}
inline void check_on(Stream s, const char* what, std::initializer_list<Access> acc) { check_on_all(s, what, acc); }
// (a vector where the number of accesses depends on the data: a launch over a table of pieces)
inline void check_on(Stream s, const char* what, const std::vector<Access>& acc) { check_on_all(s, what, acc); }
inline void device_zero(void* p, size_t bytes, Stream s) {
    check_on(s, "a memset", {writes_bytes(p, bytes)});
    auto run = [=] { memset(p, 0, bytes); };
    if (!record_copy(nullptr, p, bytes, stream_lane(s), run, [=] { stream_sync(s); })) run();
}
inline void device_copy(void* dst, const void* src, size_t bytes, Stream s) {
    check_on(s, "a copy", {reads_bytes(src, bytes), writes_bytes(dst, bytes)});
    auto run = [=] {
        if (dst != src) memcpy(dst, src, bytes);
    };
    if (!record_copy(src, dst, bytes, stream_lane(s), run, [=] { stream_sync(s); })) run();
}
#endif

// The device's used bytes (cudaMemGetInfo); 0 in the CPU build.
inline size_t device_memory_used() {
#ifdef ZERO_CUDA
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
#else
    return 0;
#endif
}

// Work of the rank's own thread (or of a host-task worker) on buffers the
// streams also touch, over n elements: named with what it reads and writes
// for checking mode, recorded instead of run in a dry run.
template <typename Fn>
void host_work(const std::string& kind, long n, std::initializer_list<Access> acc, Fn&& fn) {
    check_host(kind.c_str(), acc);
    if (OpRecorder* r = tl_recorder) {
        StepOp op;
        op.kind = kind, op.lane = r->host_lane, op.dims = {n}, op.acc = acc;
        r->add(op, r->capture ? std::function<void()>(fn) : nullptr);
        if (!r->capture) return;
    }
    fn();
}

// What every kernel launch needs: where to run, and the per-rank handles and
// scratch space of the libraries behind some kernels. One per rank, no globals.
struct KernelCtx {
    Stream stream{};
#ifdef ZERO_CUDA
    cublasLtHandle_t lt = nullptr;   // cuBLASLt handle of this rank
    void* lt_workspace = nullptr;    // cuBLASLt's workspace
    size_t lt_workspace_bytes = 0;
    void* workspace = nullptr;       // scratch for our own kernels (e.g. encoder backward buckets)
    size_t workspace_bytes = 0;
#endif
};

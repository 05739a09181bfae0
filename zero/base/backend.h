// What differs between the two builds below the model: memory, copies, streams
// and events. The CUDA build (nvcc) defines ZERO_CUDA; the CPU build (g++, or
// -DZERO_CPU) runs every "stream" synchronously on the calling thread, so
// events and waits order nothing (checking mode only checks the order they
// would give on a GPU: zero/base/stream_check.h) and copies are memcpy.
#pragma once

#include <cstddef>
#include <cstring>

#include "zero/base/common.h"
#include "zero/base/stream_check.h"

#if defined(__CUDACC__) && !defined(ZERO_CPU)
#define ZERO_CUDA 1
#endif

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

inline Stream stream_create(const char* /*name*/ = "a stream") {
    Stream s;
    cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}
inline void stream_destroy(Stream s) { cudaCheck(cudaStreamDestroy(s)); }
inline void stream_sync(Stream s) { cudaCheck(cudaStreamSynchronize(s)); }
inline Event event_create() {
    Event e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}
inline void event_destroy(Event e) { cudaCheck(cudaEventDestroy(e)); }
inline void event_record(Event e, Stream s) { cudaCheck(cudaEventRecord(e, s)); }
inline void stream_wait(Stream s, Event e) { cudaCheck(cudaStreamWaitEvent(s, e, 0)); }
inline void event_sync(Event e) { cudaCheck(cudaEventSynchronize(e)); }

inline void* device_malloc(size_t bytes) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    CHECK(err == cudaSuccess, "out of GPU memory allocating %.1f MiB: %s", bytes / 1048576.0, cudaGetErrorString(err));
    return p;
}
inline void device_free(void* p) { cudaCheck(cudaFree(p)); }
// page-locked host memory: the only kind the GPU can copy to and from asynchronously
inline void* host_malloc(size_t bytes) {
    void* p = nullptr;
    cudaError_t err = cudaMallocHost(&p, bytes);
    CHECK(err == cudaSuccess, "cannot pin %.1f MiB of host memory: %s", bytes / 1048576.0, cudaGetErrorString(err));
    return p;
}
inline void host_free(void* p) { cudaCheck(cudaFreeHost(p)); }

// checking mode is the CPU build's (zero/base/stream_check.h): nothing to check here
inline int stream_agent(Stream) { return -1; }
inline void check_on(Stream, const char*, std::initializer_list<Access>) {}

inline void device_zero(void* p, size_t bytes, Stream s) { cudaCheck(cudaMemsetAsync(p, 0, bytes, s)); }
inline void device_copy(void* dst, const void* src, size_t bytes, Stream s) {
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
}
#else
// The CPU build: a stream is just a name for "in order, now". In checking
// mode (zero/base/stream_check.h) streams and events are objects that carry
// the GPU's order for the checker; otherwise they are null and cost nothing.
struct CpuStream {
    StreamChecker* owner;
    int agent;
};
using Stream = CpuStream*;
struct CpuEvent {
    StreamChecker* owner;
    StreamChecker::Clock clock;  // the stream's clock at the last record
};
using Event = CpuEvent*;

// the checker's agent of stream s on this thread's rank, or -1
inline int stream_agent(Stream s) { return s && tl_checker && s->owner == tl_checker ? s->agent : -1; }
inline bool checked(Event e) { return e && tl_checker && e->owner == tl_checker; }

inline Stream stream_create(const char* name = "a stream") {
    return tl_checker ? new CpuStream{tl_checker, tl_checker->add_agent(name)} : nullptr;
}
inline void stream_destroy(Stream s) { delete s; }
inline void stream_sync(Stream s) {
    if (stream_agent(s) >= 0) tl_checker->sync_stream(s->agent);
}
inline Event event_create() { return tl_checker ? new CpuEvent{tl_checker, {}} : nullptr; }
inline void event_destroy(Event e) { delete e; }
inline void event_record(Event e, Stream s) {
    if (!checked(e)) return;
    e->clock = stream_agent(s) >= 0 ? tl_checker->record(s->agent) : tl_checker->now();
}
inline void stream_wait(Stream s, Event e) {
    if (checked(e) && stream_agent(s) >= 0) tl_checker->wait(s->agent, e->clock);
}
inline void event_sync(Event e) {
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
inline void check_on(Stream s, const char* what, std::initializer_list<Access> acc) {
    if (stream_agent(s) >= 0) tl_checker->issue(s->agent, what, acc);
    else check_host(what, acc);
}
inline void device_zero(void* p, size_t bytes, Stream s) {
    check_on(s, "a memset", {writes_bytes(p, bytes)});
    memset(p, 0, bytes);
}
inline void device_copy(void* dst, const void* src, size_t bytes, Stream s) {
    check_on(s, "a copy", {reads_bytes(src, bytes), writes_bytes(dst, bytes)});
    if (dst != src) memcpy(dst, src, bytes);
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
// streams also touch: named with what it reads and writes, for checking mode.
template <typename Fn>
void host_work(const char* what, std::initializer_list<Access> acc, Fn&& fn) {
    check_host(what, acc);
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

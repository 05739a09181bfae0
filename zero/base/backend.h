// What differs between the two builds below the model: memory, copies, streams
// and events. The CUDA build (nvcc) defines ZERO_CUDA; the CPU build (g++, or
// -DZERO_CPU) runs every "stream" synchronously on the calling thread, so
// events and waits are no-ops and copies are memcpy.
#pragma once

#include <cstddef>
#include <cstring>

#include "zero/base/common.h"

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

inline Stream stream_create() {
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

inline void device_zero(void* p, size_t bytes, Stream s) { cudaCheck(cudaMemsetAsync(p, 0, bytes, s)); }
inline void device_copy(void* dst, const void* src, size_t bytes, Stream s) {
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
}
#else
// The CPU build: a stream is just a name for "in order, now".
struct CpuStream;
using Stream = CpuStream*;
struct CpuEvent;
using Event = CpuEvent*;

inline Stream stream_create() { return nullptr; }
inline void stream_destroy(Stream) {}
inline void stream_sync(Stream) {}
inline Event event_create() { return nullptr; }
inline void event_destroy(Event) {}
inline void event_record(Event, Stream) {}
inline void stream_wait(Stream, Event) {}
inline void event_sync(Event) {}

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

inline void device_zero(void* p, size_t bytes, Stream) { memset(p, 0, bytes); }
inline void device_copy(void* dst, const void* src, size_t bytes, Stream) {
    if (dst != src) memcpy(dst, src, bytes);
}
#endif

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

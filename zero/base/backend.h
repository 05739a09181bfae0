// What differs between the two builds below the model: memory, copies, streams
// and events. The CUDA build (nvcc) defines ZERO_CUDA; the CPU build (g++, or
// -DZERO_CPU) runs every "stream" synchronously on the calling thread, so
// events and waits order nothing (checking mode only checks the order they
// would give on a GPU: zero/base/stream_check.h) and copies are memcpy.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/ops.h"
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

// Each stream's lane, as stream_create was told, for the process (a stream
// made before a recorder still has its lane when one records its ops). A dry
// run makes no CUDA call: its streams and events are stand-in handles.
inline std::mutex stream_lanes_mu;
inline std::map<const void*, Lane> stream_lanes;  // under stream_lanes_mu
inline Lane stream_lane(Stream s) {
    std::lock_guard<std::mutex> lock(stream_lanes_mu);
    auto it = stream_lanes.find(s);
    return it == stream_lanes.end() ? Lane::Compute : it->second;
}

inline Stream stream_create(Lane lane, const char* /*name: checking mode's, in the CPU build*/ = "a stream") {
    Stream s;
    if (dry_recorder()) s = (Stream)stand_in_handle();
    else cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::lock_guard<std::mutex> lock(stream_lanes_mu);
    stream_lanes[s] = lane;
    return s;
}
inline void stream_destroy(Stream s) {
    {
        std::lock_guard<std::mutex> lock(stream_lanes_mu);
        stream_lanes.erase(s);
    }
    if (!dry_recorder()) cudaCheck(cudaStreamDestroy(s));
}
inline void stream_sync(Stream s) {
    auto sync = [=] { if (!dry_recorder()) cudaCheck(cudaStreamSynchronize(s)); };
    if (OpRecorder* r = tl_recorder) r->host_wait(r->last_on(stream_lane(s)), sync);
    else sync();
}
inline Event event_create() {
    if (dry_recorder()) return (Event)stand_in_handle();
    Event e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}
inline void event_destroy(Event e) {
    if (OpRecorder* r = tl_recorder) r->forget_event(e);
    if (!dry_recorder()) cudaCheck(cudaEventDestroy(e));
}
inline void event_record(Event e, Stream s) {
    if (OpRecorder* r = tl_recorder) r->event_recorded(e, stream_lane(s));
    if (!dry_recorder()) cudaCheck(cudaEventRecord(e, s));
}
inline void stream_wait(Stream s, Event e) {
    if (OpRecorder* r = tl_recorder) r->wait(stream_lane(s), r->event_op(e));
    if (!dry_recorder()) cudaCheck(cudaStreamWaitEvent(s, e, 0));
}
inline void event_sync(Event e) {
    auto sync = [=] { if (!dry_recorder()) cudaCheck(cudaEventSynchronize(e)); };
    if (OpRecorder* r = tl_recorder) r->host_wait(r->event_op(e), sync);
    else sync();
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
inline void check_on(Stream, const char*, std::initializer_list<Access>) {}
inline void check_on(Stream, const char*, const std::vector<Access>&) {}

#else
// The CPU build: a stream is just a name for "in order, now", with its lane
// (zero/base/ops.h). In checking mode (zero/base/stream_check.h) streams and
// events also carry the GPU's order for the checker.
struct CpuStream {
    StreamChecker* owner;  // checking mode's checker, or null
    int agent;
    Lane lane;
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
inline Lane stream_lane(Stream s) { return s ? s->lane : Lane::Compute; }

inline Stream stream_create(Lane lane, const char* name = "a stream") {
    return new CpuStream{tl_checker, tl_checker ? tl_checker->add_agent(name) : -1, lane};
}
inline void stream_destroy(Stream s) { delete s; }
inline void stream_sync(Stream s) {
    if (stream_agent(s) >= 0) tl_checker->sync_stream(s->agent);
    if (OpRecorder* r = tl_recorder) r->host_wait(r->last_on(stream_lane(s)));
}
inline Event event_create() { return new CpuEvent{tl_checker, {}}; }
inline void event_destroy(Event e) {
    if (OpRecorder* r = tl_recorder) r->forget_event(e);
    delete e;
}
inline void event_record(Event e, Stream s) {
    if (OpRecorder* r = tl_recorder) r->event_recorded(e, stream_lane(s));
    if (!checked(e)) return;
    e->clock = stream_agent(s) >= 0 ? tl_checker->record(s->agent) : tl_checker->now();
}
inline void stream_wait(Stream s, Event e) {
    if (OpRecorder* r = tl_recorder) r->wait(stream_lane(s), r->event_op(e));
    if (checked(e) && stream_agent(s) >= 0) tl_checker->wait(s->agent, e->clock);
}
inline void event_sync(Event e) {
    if (OpRecorder* r = tl_recorder) r->host_wait(r->event_op(e));
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
#endif

// A copy (src null: a memset) as an op of the step (zero/base/ops.h): "zero",
// a "copy" within an arena, "to_host" or "to_device" across them, by where
// the accountant's buffers are; `run` queues it on its stream, `finish` waits
// for the stream. A capture can run it again only between buffers that
// outlive the step (a read-back's vector dies).
template <typename Run, typename Finish>
void copy_op(const void* src, void* dst, size_t bytes, Stream s, Run&& run, Finish&& finish) {
    OpRecorder* r = tl_recorder;
    if (!r) return run();
    const bool from_device = src && r->on_device(src), to_device = r->on_device(dst);
    StepOp op = step_op(!src                       ? OpKind::Zero
                        : from_device == to_device ? OpKind::Copy
                        : from_device              ? OpKind::ToHost
                                                   : OpKind::ToDevice,
                        stream_lane(s));
    op.bytes = bytes, op.dims = {(long)bytes};
    op.acc = {reads_bytes(src, bytes), writes_bytes(dst, bytes)};
    perform(op, s, run, finish, r->known(dst) && (!src || r->known(src)));
}

inline void device_zero(void* p, size_t bytes, Stream s) {
    check_on(s, "a memset", {writes_bytes(p, bytes)});
#ifdef ZERO_CUDA
    copy_op(nullptr, p, bytes, s, [=] { cudaCheck(cudaMemsetAsync(p, 0, bytes, s)); },
            [=] { cudaCheck(cudaStreamSynchronize(s)); });
#else
    copy_op(nullptr, p, bytes, s, [=] { memset(p, 0, bytes); }, [=] { stream_sync(s); });
#endif
}
inline void device_copy(void* dst, const void* src, size_t bytes, Stream s) {
    check_on(s, "a copy", {reads_bytes(src, bytes), writes_bytes(dst, bytes)});
#ifdef ZERO_CUDA
    copy_op(src, dst, bytes, s, [=] { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s)); },
            [=] { cudaCheck(cudaStreamSynchronize(s)); });
#else
    copy_op(src, dst, bytes, s, [=] { if (dst != src) memcpy(dst, src, bytes); }, [=] { stream_sync(s); });
#endif
}

// A traced capture's clock (zero/base/ops.h, OpStamps): each op's start and
// end in seconds of the process's steady clock, so that emulated ranks line
// up. The thread's own work is stamped by the clock around it; on a GPU a
// stream's op by events on its stream, read once the device is done (the
// CPU build's streams run on the thread: its clock is theirs).
class OpClock : public OpStamps {
  public:
    OpClock() {
#ifdef ZERO_CUDA
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaEventCreate(&origin));
        cudaCheck(cudaEventRecord(origin, 0));
        cudaCheck(cudaEventSynchronize(origin));
#endif
        origin_s = now();
    }
    ~OpClock() override {
#ifdef ZERO_CUDA
        for (auto& e : events) cudaEventDestroy(e.second);
        cudaEventDestroy(origin);
#endif
    }

    void begin(int op, const void* stream) override { stamp(op, stream, 0); }
    void end(int op, const void* stream) override { stamp(op, stream, 1); }
    void span(int op, double start_s, double end_s, int place) override {
        std::lock_guard<std::mutex> lock(mu);
        grow(op), at[0][op] = start_s, at[1][op] = end_s, places[op] = place;
    }
    // op i's start and end (NaN: never stamped) and place (-1: none), once every stamped op is done
    void read(std::vector<double>& start, std::vector<double>& end, std::vector<int>& place) {
#ifdef ZERO_CUDA
        cudaCheck(cudaDeviceSynchronize());
        for (auto& e : events) {
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, origin, e.second));
            at[e.first.second][e.first.first] = origin_s + ms / 1e3;
        }
#endif
        std::lock_guard<std::mutex> lock(mu);
        start = at[0], end = at[1], place = places;
    }
    static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

  private:
    std::mutex mu;
    std::vector<double> at[2];  // start, end of each op
    std::vector<int> places;    // each op's place, where span() gave one
    double origin_s = 0;
#ifdef ZERO_CUDA
    cudaEvent_t origin{};  // when origin_s was, on the device
    std::map<std::pair<int, int>, cudaEvent_t> events;  // (op, 0 start / 1 end)
#endif
    void grow(int op) {
        if ((int)at[0].size() <= op) at[0].resize(op + 1, NAN), at[1].resize(op + 1, NAN), places.resize(op + 1, -1);
    }
    void stamp(int op, const void* stream, int which) {
#ifdef ZERO_CUDA
        if (stream) {
            cudaEvent_t e;
            cudaCheck(cudaEventCreate(&e));
            cudaCheck(cudaEventRecord(e, (cudaStream_t)stream));
            std::lock_guard<std::mutex> lock(mu);
            events[{op, which}] = e, grow(op);
            return;
        }
#endif
        (void)stream;
        std::lock_guard<std::mutex> lock(mu);
        grow(op), at[which][op] = now();
    }
};

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
    const Lane lane = tl_recorder ? tl_recorder->host_lane : Lane::Host;
    StepOp op = step_op(OpKind::HostWork, lane, kind);
    op.dims = {n}, op.acc = acc;
    perform(op, nullptr, fn);
}

struct CudnnAttention;  // kernels/attention_cudnn.cuh

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
    CudnnAttention* cudnn = nullptr;  // --attention cudnn: its handle and plans; null: our own kernels
#endif
};

// The NCCL backend: one rank per process and GPU, started by a launcher (mpirun,
// srun, torchrun-style variables; zero/comm/launcher.h). Only the CUDA build includes
// this file.
//
// Bulk collectives are enqueued on the caller's stream and never synchronise
// the host. They are, however, kept in issue order on the GPU across streams:
// every collective records an event, and one issued on a different stream than
// the previous one first waits on it. All ranks issue the same collectives in
// the same order, and so NCCL never sees two of this communicator's operations
// in flight in different orders on different ranks.
//
// Host scalars (losses, norms, overflow flags) travel as an all-gather of one
// double per rank on an internal stream, and each rank then reduces the
// gathered values itself in rank order: the same bits on every rank, and the
// same bits as the emulated backend's rank-order sum. (An ncclAllReduce of one
// double would also agree across ranks, but in NCCL's order, not rank order.)
// That is N-1 doubles each way per rank, the count CommStats gets.
//
// Point-to-point (pipeline stages) is ncclSend / ncclRecv; the operations
// between group_start() and group_end() go inside ncclGroupStart/End, so a
// stage's send to a neighbour and its receive from it progress together. The
// watchdog names the peer of a send or receive that never completes.
#pragma once

#include "zero/base/backend.h"

#ifdef ZERO_CUDA

#include <nccl.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "zero/comm/bootstrap.h"
#include "zero/comm/comm.h"
#include "zero/comm/launcher.h"

// NCCL's error and its last-error detail, on one line.
inline std::string nccl_error_text(ncclResult_t r) {
    std::string s = ncclGetErrorString(r);
    const char* last = ncclGetLastError(nullptr);
    if (last && *last) s += std::string(": ") + last;
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

#define ncclCheck(call)                                                                                     \
    do {                                                                                                    \
        ncclResult_t r_ = (call);                                                                           \
        if (r_ != ncclSuccess)                                                                              \
            fail("NCCL error at %s:%d: %s (NCCL_DEBUG=WARN tells more)", __FILE__, __LINE__,                \
                 nccl_error_text(r_).c_str());                                                              \
    } while (0)

inline ncclDataType_t nccl_dtype(DType dt) {
    switch (dt) {
        case DType::F32: return ncclFloat32;
        case DType::BF16: return ncclBfloat16;
        case DType::F16: return ncclFloat16;
    }
    fail("no NCCL type for dtype %d", (int)dt);
}

class NcclComm : public Comm {
  public:
    // Takes ownership of `c` (finalised and destroyed with this object). A
    // collective not done timeout_s after it was issued ends the job (watchdog()).
    NcclComm(ncclComm_t c, int rank_, int world_, double timeout_s = COLLECTIVE_TIMEOUT_S)
        : Comm(rank_, world_), comm(c), timeout(timeout_s) {
        internal = stream_create(Lane::Comm, "the scalars' stream");
        last_done = event_create();
        scalars_host = (double*)host_malloc(world * sizeof(double));
        scalars_dev = (double*)device_malloc(world * sizeof(double));
        cudaCheck(cudaGetDevice(&device));
        watcher = std::thread([this] { watchdog(); });
    }
    ~NcclComm() override {
        // everything this rank enqueued must be done before NCCL lets go of it
        cudaCheck(cudaDeviceSynchronize());
        {
            std::lock_guard<std::mutex> lock(watch_mu);
            stopping = true;
        }
        watch_cv.notify_all();
        watcher.join();
        ncclCheck(ncclCommFinalize(comm));
        ncclCheck(ncclCommDestroy(comm));
        device_free(scalars_dev);
        host_free(scalars_host);
        event_destroy(last_done);
        stream_destroy(internal);
    }
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    // Every rank has got here (a host barrier; the GPUs' queued work is not waited for).
    void barrier() override {
        ordered(internal);
        ncclCheck(ncclAllReduce(scalars_dev, scalars_dev, 1, ncclFloat64, ncclSum, comm, internal));
        issued(internal, "a barrier");
        wait(internal);
    }

    // ncclCommSplit: a collective over this communicator's ranks.
    std::unique_ptr<Comm> split(int color, int key) override {
        ncclComm_t sub = nullptr;
        ncclCheck(ncclCommSplit(comm, color, key, &sub, nullptr));
        int sub_rank = 0, sub_world = 0;
        ncclCheck(ncclCommUserRank(sub, &sub_rank));
        ncclCheck(ncclCommCount(sub, &sub_world));
        return std::make_unique<NcclComm>(sub, sub_rank, sub_world, timeout);  // (--timeout holds in every group)
    }

  protected:
    void run_all_reduce_sum(void* buf, size_t count, DType dt, Stream s) override {
        collective(count, s, "all_reduce",
                   [&] { return ncclAllReduce(buf, buf, count, nccl_dtype(dt), ncclSum, comm, s); });
    }
    void run_reduce_scatter_sum(const void* send, void* recv, size_t recvcount, DType dt, Stream s) override {
        collective(recvcount, s, "reduce_scatter",
                   [&] { return ncclReduceScatter(send, recv, recvcount, nccl_dtype(dt), ncclSum, comm, s); });
    }
    void run_all_gather(const void* send, void* recv, size_t sendcount, DType dt, Stream s) override {
        collective(sendcount, s, "all_gather",
                   [&] { return ncclAllGather(send, recv, sendcount, nccl_dtype(dt), comm, s); });
    }
    void run_broadcast(void* buf, size_t bytes, int root, Stream s) override {
        collective(bytes, s, "broadcast", [&] { return ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm, s); });
    }
    void run_send(const void* buf, size_t bytes, int peer, Stream s) override {
        point_to_point(true, (void*)buf, bytes, peer, s);
    }
    void run_recv(void* buf, size_t bytes, int peer, Stream s) override { point_to_point(false, buf, bytes, peer, s); }
    std::vector<double> run_gather_scalar(double x) override {
        scalars_host[rank] = x;
        ordered(internal);
        cudaCheck(cudaMemcpyAsync(scalars_dev + rank, scalars_host + rank, sizeof(double), cudaMemcpyHostToDevice,
                                  internal));
        ncclCheck(ncclAllGather(scalars_dev + rank, scalars_dev, 1, ncclFloat64, comm, internal));  // in place
        issued(internal, "a scalar reduction");
        cudaCheck(cudaMemcpyAsync(scalars_host, scalars_dev, world * sizeof(double), cudaMemcpyDeviceToHost,
                                  internal));
        wait(internal);
        return std::vector<double>(scalars_host, scalars_host + world);
    }
    void run_group_start() override {
        ncclCheck(ncclGroupStart());
        in_group = true;
        group_what.clear();
        group_stream = nullptr;
    }
    void run_group_end() override {
        ncclCheck(ncclGroupEnd());
        in_group = false;
        if (!group_what.empty()) issued(group_stream, group_what);
    }

  private:
    ncclComm_t comm;
    Stream internal;
    Event last_done;               // recorded after the latest collective
    Stream last_stream = nullptr;  // ... on this stream
    bool any_issued = false;
    double* scalars_host;  // pinned, world doubles
    double* scalars_dev;

    // the watchdog's view: the latest collective, when it was issued
    double timeout;
    int device = 0;
    std::thread watcher;
    std::mutex watch_mu;
    std::condition_variable watch_cv;
    bool stopping = false;
    std::string last_op;
    std::chrono::steady_clock::time_point last_issued;

    // the open group's operations (one stream), for the watchdog's message
    bool in_group = false;
    std::string group_what;
    Stream group_stream = nullptr;

    void point_to_point(bool send, void* buf, size_t bytes, int peer, Stream s) {
        if (bytes == 0) return;
        CHECK(!in_group || !group_stream || group_stream == s, "internal: one group of sends and receives, one stream");
        if (!in_group || !group_stream) ordered(s);
        if (send) ncclCheck(ncclSend(buf, bytes, ncclUint8, peer, comm, s));
        else ncclCheck(ncclRecv(buf, bytes, ncclUint8, peer, comm, s));
        std::string what = std::string(send ? "a send of " : "a receive of ") + std::to_string(bytes) + " bytes " +
                           (send ? "to" : "from") + " rank " + std::to_string(peer) + " of its group";
        if (!in_group) return issued(s, what);
        group_what += (group_what.empty() ? "" : " and ") + what;
        group_stream = s;
    }

    // One bulk collective on s (none for an empty buffer), in issue order and watched.
    template <typename Call>
    void collective(size_t count, Stream s, const char* what, Call call) {
        if (count == 0) return;
        ordered(s);
        ncclCheck(call());
        issued(s, what);
    }
    // Keep this communicator's collectives in issue order across streams.
    void ordered(Stream s) {
        if (any_issued && s != last_stream) stream_wait(s, last_done);
    }
    void issued(Stream s, const std::string& op) {
        std::lock_guard<std::mutex> lock(watch_mu);
        event_record(last_done, s);
        last_stream = s;
        any_issued = true;
        last_op = op;
        last_issued = std::chrono::steady_clock::now();
    }

    // A thread per rank that polls NCCL's asynchronous error (a peer that died, a
    // broken connection) and the latest collective: the GPU runs collectives in
    // issue order, so if the latest is not done `timeout` seconds after it was
    // issued, some rank never joined it (or an earlier one) and the job would hang
    // wherever the host next waits (cudaStreamSynchronize included). Either way
    // the process ends with a line saying why. Not ncclCommAbort first: it can
    // block on this rank's other communicators' kernels, still waiting for the
    // same dead peer, and the line would never come; the process's end releases
    // the communicators anyway.
    void watchdog() {
        cudaSetDevice(device);
        std::unique_lock<std::mutex> lock(watch_mu);
        while (!watch_cv.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping; })) {
            ncclResult_t async = ncclSuccess;
            ncclResult_t r = ncclCommGetAsyncError(comm, &async);
            if (r == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
                std::string why = nccl_error_text(async);
                fail("rank %d: NCCL failed in %s: %s (a peer rank died or its connection broke)", rank,
                     last_op.c_str(), why.c_str());
            }
            if (!any_issued || timeout <= 0) continue;
            double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_issued).count();
            if (waited > timeout && cudaEventQuery(last_done) == cudaErrorNotReady) {
                fail("rank %d: %s issued %.0f s ago has not completed: some rank died or never joined it (or an "
                     "earlier collective); --timeout sets the limit",
                     rank, last_op.c_str(), waited);
            }
        }
    }

    // Waits for `s`, watching for NCCL's asynchronous errors (a peer that died, a
    // broken connection) instead of hanging in cudaStreamSynchronize forever.
    void wait(Stream s) {
        for (int spins = 0;; spins++) {
            cudaError_t e = cudaStreamQuery(s);
            if (e == cudaSuccess) return;
            if (e != cudaErrorNotReady) cudaCheck(e);
            ncclResult_t async = ncclSuccess;
            ncclCheck(ncclCommGetAsyncError(comm, &async));
            if (async != ncclSuccess && async != ncclInProgress) {
                std::string why = nccl_error_text(async);
                fail("rank %d: NCCL failed while waiting for the other ranks: %s", rank, why.c_str());
            }
            if (spins < 1000) std::this_thread::yield();
            else std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

};

// Which GPU this rank drives: GPU local_rank of those it sees. A process that
// sees exactly one GPU uses it whatever its local rank (the launcher gave each
// rank its own GPU through CUDA_VISIBLE_DEVICES; if not, and two ranks of a host
// land on the same one, the rendezvous says so).
inline int select_rank_device(const LaunchEnv& env) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    CHECK(err == cudaSuccess, "rank %d: no usable CUDA GPU: %s", env.rank, cudaGetErrorString(err));
    CHECK(count > 0, "rank %d: no CUDA GPU visible to this process", env.rank);
    if (env.local_rank < count) return env.local_rank;
    const char* visible = getenv("CUDA_VISIBLE_DEVICES");
    CHECK(count == 1,
          "rank %d has local rank %d but this process sees only %d GPUs (CUDA_VISIBLE_DEVICES=%s): start at most %d "
          "ranks per host, one per GPU; to emulate more ranks run one process with --ranks N",
          env.rank, env.local_rank, count, visible ? visible : "<unset>", count);
    return 0;
}

// Runs fn(comm) as rank env.rank of env.world: picks and binds the GPU, meets the
// other ranks (zero/comm/bootstrap.h), creates the NCCL communicator, and tears it
// down after fn returns.
inline void run_nccl_rank(const LaunchEnv& env, const std::function<void(Comm&)>& fn, double timeout_s = 0) {
    const int device = select_rank_device(env);
    cudaCheck(cudaSetDevice(device));

    char bus[64] = {};
    cudaCheck(cudaDeviceGetPCIBusId(bus, sizeof(bus), device));
    for (char* p = bus; *p; p++) *p = (char)tolower((unsigned char)*p);
    char host[256] = {};
    CHECK(gethostname(host, sizeof(host) - 1) == 0, "rank %d: gethostname failed: %s", env.rank, strerror(errno));
    const BootstrapRecord mine{env.rank, env.world, host, bus};

    BootstrapOptions boot = bootstrap_options_from_env();
    if (timeout_s > 0) boot.timeout_s = timeout_s;  // --timeout
    std::vector<uint8_t> id_bytes = rendezvous(env, mine, [](const std::vector<BootstrapRecord>&) {
        ncclUniqueId id;
        ncclResult_t r = ncclGetUniqueId(&id);
        // thrown, not failed: the rendezvous then gives every rank this message
        if (r != ncclSuccess) throw std::runtime_error("rank 0: ncclGetUniqueId failed: " + nccl_error_text(r));
        return std::vector<uint8_t>((const uint8_t*)&id, (const uint8_t*)&id + sizeof(id));
    }, boot);
    CHECK(id_bytes.size() == sizeof(ncclUniqueId), "rank %d: the rendezvous gave %zu bytes, not an NCCL id of %zu",
          env.rank, id_bytes.size(), sizeof(ncclUniqueId));
    ncclUniqueId id;
    memcpy(&id, id_bytes.data(), sizeof(id));

    ncclComm_t c = nullptr;
    ncclCheck(ncclCommInitRank(&c, env.world, id, env.rank));
    if (env.rank == 0) {
        int version = 0;
        ncclGetVersion(&version);
        printf("NCCL %d.%d.%d: %d ranks (%s), rank 0 on GPU %s of host %s\n", version / 10000, version / 100 % 100,
               version % 100, env.world, env.source.c_str(), bus, host);
        fflush(stdout);
    }
    NcclComm comm(c, env.rank, env.world, timeout_s > 0 ? timeout_s : COLLECTIVE_TIMEOUT_S);
    fn(comm);
}

#endif  // ZERO_CUDA

// One communication interface for the stages, two backends behind it:
// EmulatedComm (N ranks as threads of one process; zero/comm/comm_emulated.h) and
// NcclComm (one rank per process and GPU; zero/comm/comm_nccl.h). Every
// collective counts, per rank, the bytes it sends and receives (below).
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "zero/base/backend.h"
#include "zero/base/dtype.h"

// How long a rank waits in a collective for the others when --timeout does not
// say: long enough for rank 0 to write a large checkpoint while the others wait.
constexpr double COLLECTIVE_TIMEOUT_S = 900.0;

enum class CommOp : int { AllReduce, ReduceScatter, AllGather, Broadcast, Scalar, PointToPoint, COUNT };
constexpr int NUM_COMM_OPS = (int)CommOp::COUNT;

inline const char* comm_op_name(CommOp op) {
    static const char* names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "scalar", "p2p"};
    return names[(int)op];
}

struct CommStats {
    uint64_t sent[NUM_COMM_OPS] = {};
    uint64_t recv[NUM_COMM_OPS] = {};
    uint64_t calls[NUM_COMM_OPS] = {};
    void add(CommOp op, uint64_t bytes_sent, uint64_t bytes_recv) {
        sent[(int)op] += bytes_sent;
        recv[(int)op] += bytes_recv;
        calls[(int)op] += 1;
    }
    void add(const CommStats& o) {
        for (int op = 0; op < NUM_COMM_OPS; op++) sent[op] += o.sent[op], recv[op] += o.recv[op], calls[op] += o.calls[op];
    }
    // the bulk traffic: everything but the scalar reductions of losses and norms
    uint64_t bulk_sent() const { return std::accumulate(sent, sent + NUM_COMM_OPS, uint64_t{0}) - sent[SCALAR]; }
    uint64_t bulk_recv() const { return std::accumulate(recv, recv + NUM_COMM_OPS, uint64_t{0}) - recv[SCALAR]; }
    static constexpr int SCALAR = (int)CommOp::Scalar;
};

class Comm {
  public:
    Comm(int rank_, int world_) : rank(rank_), world(world_) {}
    virtual ~Comm() = default;
    const int rank, world;
    CommStats stats;
    std::string group_name = "world";  // its recorded ops' group

    // Each call below is an op of the step (zero/base/ops.h): checked in
    // checking mode, recorded when the thread records, counted, and run by
    // the backend (run_*) unless this is a dry run's group. One rank alone
    // runs nothing that moves no byte: its reduction is its own buffer, a
    // gather its own slice. The bytes counted are a ring's, each direction per
    // rank (the emulated backend reads exactly these from its peers):
    // all-reduce count + (N-2)|this rank's chunk| = 2(N-1)/N count for even
    // chunks (a reduce-scatter then an all-gather), reduce-scatter and
    // all-gather (N-1)/N of the whole buffer, a broadcast the buffer once from
    // the root.

    // In place: `buf` (count elements) becomes the elementwise sum over ranks.
    void all_reduce_sum(void* buf, size_t count, DType dt, Stream s) {
        const uint64_t bytes = count * dtype_size(dt);
        issue(OpKind::AllReduce, "an all-reduce", bytes, s, {writes_bytes(buf, bytes)}, -1, [&] {
            if (world > 1) run_all_reduce_sum(buf, count, dt, s);
        });
        const size_t chunk = count * (rank + 1) / world - count * rank / world;
        const uint64_t moved = world == 1 ? 0 : (count + (uint64_t)(world - 2) * chunk) * dtype_size(dt);
        stats.add(CommOp::AllReduce, moved, moved);
    }
    // `send` holds world*recvcount elements; this rank receives the sum over ranks
    // of elements [rank*recvcount, (rank+1)*recvcount). In place when
    // recv == send + rank*recvcount.
    void reduce_scatter_sum(const void* send, void* recv, size_t recvcount, DType dt, Stream s) {
        const size_t bytes = recvcount * dtype_size(dt);
        issue(OpKind::ReduceScatter, "a reduce-scatter", world * bytes, s,
              {reads_bytes(send, world * bytes), writes_bytes(recv, bytes)}, -1, [&] {
                  if (world > 1) run_reduce_scatter_sum(send, recv, recvcount, dt, s);
                  else if (recv != send) device_copy(recv, send, bytes, s);
              });
        stats.add(CommOp::ReduceScatter, (world - 1) * bytes, (world - 1) * bytes);
    }
    // `recv` gets world*sendcount elements, rank k's `send` at k*sendcount. In
    // place when send == recv + rank*sendcount.
    void all_gather(const void* send, void* recv, size_t sendcount, DType dt, Stream s) {
        const size_t bytes = sendcount * dtype_size(dt);
        issue(OpKind::AllGather, "an all-gather", world * bytes, s,
              {reads_bytes(send, bytes), writes_bytes(recv, world * bytes)}, -1, [&] {
                  if (world > 1) run_all_gather(send, recv, sendcount, dt, s);
                  else if (recv != send) device_copy(recv, send, bytes, s);
              });
        stats.add(CommOp::AllGather, (world - 1) * bytes, (world - 1) * bytes);
    }
    // `bytes` of `buf` from `root` to every rank.
    void broadcast(void* buf, size_t bytes, int root, Stream s) {
        issue(OpKind::Broadcast, "a broadcast", bytes, s,
              {rank == root ? reads_bytes(buf, bytes) : writes_bytes(buf, bytes)}, -1, [&] {
                  if (world > 1) run_broadcast(buf, bytes, root, s);
              });
        stats.add(CommOp::Broadcast, rank == root ? bytes : 0, rank == root ? 0 : bytes);
    }
    virtual void barrier() = 0;

    // Small host-side reductions (losses, norms, overflow flags): blocking, and
    // reduced in rank order so every rank gets the same bits (a dry run's: its own; comm_dry.h).
    double sum_scalar(double x) { return scalar(x, [](double a, double b) { return a + b; }); }
    double max_scalar(double x) { return scalar(x, [](double a, double b) { return a > b ? a : b; }); }

    // Point-to-point, between pipeline stages: `bytes` of `buf` to or from rank
    // `peer`. A send completes once the peer has received it, so two ranks that
    // send to each other must post both sends before either receive: between
    // group_start() and group_end() the operations are posted together and
    // complete together (NCCL's group semantics). Counted as PointToPoint:
    // sent bytes by the sender, received bytes by the receiver, as posted.
    void send(const void* buf, size_t bytes, int peer, Stream s) {
        issue(OpKind::Send, "a send", bytes, s, {reads_bytes(buf, bytes)}, peer, [&] { run_send(buf, bytes, peer, s); });
        stats.add(CommOp::PointToPoint, bytes, 0);
    }
    void recv(void* buf, size_t bytes, int peer, Stream s) {
        issue(OpKind::Recv, "a receive", bytes, s, {writes_bytes(buf, bytes)}, peer, [&] { run_recv(buf, bytes, peer, s); });
        stats.add(CommOp::PointToPoint, 0, bytes);
    }
    void group_start() {
        grouped.clear(), grouping = true;
        run_group_start();
    }
    void group_end() {
        run_group_end();
        grouping = false;
        flush_p2p_stamps();
    }

    // A sub-communicator, as ncclCommSplit makes one: every rank of this one
    // calls it together; the ranks giving the same color form a group, ranked
    // by key (ties by rank here). The new communicator counts its own bytes,
    // so a tensor group's traffic is told apart from a data group's.
    virtual std::unique_ptr<Comm> split(int color, int key) = 0;

    // A dry run's groups (zero/comm/comm_dry.h) record instead of moving bytes.
    virtual bool dry() const { return false; }

  protected:
    // The backend's own part of each call above (never called with world == 1
    // for the bulk collectives). A point-to-point op may complete at group_end().
    virtual void run_all_reduce_sum(void* buf, size_t count, DType dt, Stream s) = 0;
    virtual void run_reduce_scatter_sum(const void* send, void* recv, size_t recvcount, DType dt, Stream s) = 0;
    virtual void run_all_gather(const void* send, void* recv, size_t sendcount, DType dt, Stream s) = 0;
    virtual void run_broadcast(void* buf, size_t bytes, int root, Stream s) = 0;
    virtual std::vector<double> run_gather_scalar(double x) = 0;  // every rank's x, in rank order
    virtual void run_send(const void* buf, size_t bytes, int peer, Stream s) = 0;
    virtual void run_recv(void* buf, size_t bytes, int peer, Stream s) = 0;
    virtual void run_group_start() = 0;
    virtual void run_group_end() = 0;
    // A traced step's k-th send or receive of the group just run (op `op` on stream s): it ends with the group
    // (NCCL runs a group's operations together), unless the backend timed each one.
    virtual void stamp_p2p(OpStamps& stamps, size_t k, int op, Stream s) { stamps.end(op, s), (void)k; }

  private:
    bool grouping = false;                        // between group_start() and group_end()
    std::vector<std::pair<int, Stream>> grouped;  // the group's recorded sends and receives and their streams

    void flush_p2p_stamps() {
        if (OpRecorder* r = tl_recorder; r && r->stamps)
            for (size_t k = 0; k < grouped.size(); k++) stamp_p2p(*r->stamps, k, grouped[k].first, grouped[k].second);
        grouped.clear();
    }

    // One op of the step on stream s: checked, recorded, then run (by the
    // backend: its own streams, events and copies are not the step's ops).
    template <typename Run>
    void issue(OpKind kind, const char* what, uint64_t bytes, Stream s, std::initializer_list<Access> acc, int peer,
               Run&& run) {
        check_on(s, what, acc);
        StepOp op = step_op(kind, stream_lane(s));
        op.group = group_name, op.bytes = bytes, op.peer = peer, op.acc = acc;
        if (peer >= 0) op.dims = {(long)bytes};
        perform(op, s, [&] {
            NotRecorded backend_own;
            run();
        }, nullptr, false);
        if (peer < 0 || !tl_recorder) return;
        grouped.push_back({(int)tl_recorder->ops.size() - 1, s});
        if (!grouping) flush_p2p_stamps();  // (run as it was posted)
    }
    double scalar(double x, double (*reduce)(double, double)) {
        StepOp op = step_op(OpKind::Scalar, Lane::Host);
        op.group = group_name, op.bytes = sizeof(double);
        double out = x;
        perform(op, nullptr, [&] {
            NotRecorded backend_own;
            const std::vector<double> all = run_gather_scalar(x);
            out = all[0];
            for (size_t k = 1; k < all.size(); k++) out = reduce(out, all[k]);
        }, nullptr, false);
        stats.add(CommOp::Scalar, (world - 1) * sizeof(double), (world - 1) * sizeof(double));
        return out;
    }
};

// One communication interface for the stages, two backends behind it:
// EmulatedComm (N ranks as threads of one process; zero/comm/comm_emulated.h) and
// NcclComm (one rank per process and GPU; zero/comm/comm_nccl.h).
//
// Every collective counts, per rank, the bytes it sends and receives. The
// emulated backend counts the bytes it actually reads from peers' buffers and
// the bytes of its own buffers peers read; NCCL's are those of its ring
// algorithms. Both equal the textbook ring volumes: reduce-scatter and
// all-gather move (N-1)/N of the full buffer in each direction per rank,
// all-reduce twice that.
#pragma once

#include <cstdint>
#include <memory>
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
    uint64_t bulk_sent() const { return total(sent) - sent[(int)CommOp::Scalar]; }
    uint64_t bulk_recv() const { return total(recv) - recv[(int)CommOp::Scalar]; }
    static uint64_t total(const uint64_t* a) {
        uint64_t t = 0;
        for (int i = 0; i < NUM_COMM_OPS; i++) t += a[i];
        return t;
    }
};

// A rank's step as it happened: every collective, on whichever group, and
// every host transfer of the engine and the activations, in the order they
// were issued, with the whole buffer's bytes (count x element size: a
// reduce-scatter's input, an all-gather's output) and the unit they serve.
// The step-time model lists the same (zero/perf/, test perf_trace); the
// trainer writes it with --mem_report 1 -o DIR (comm_trace_rank<r>.csv).
struct TraceEntry {
    std::string op;     // all_reduce, reduce_scatter, all_gather, broadcast, scalar, send, recv; to_host, to_device
    std::string group;  // data, tensor, pipe, tied, world; host for a transfer
    uint64_t bytes = 0;
    int unit = -1;      // -1: no unit (scalars)
};
using Trace = std::vector<TraceEntry>;

class Comm {
  public:
    Comm(int rank_, int world_) : rank(rank_), world(world_) {}
    virtual ~Comm() = default;
    const int rank, world;
    CommStats stats;
    // tracing (off while trace is null): the group's name in it, and the unit
    // the next collectives serve (set by the engine and the model)
    Trace* trace = nullptr;
    std::string group_name = "world";
    int unit = -1;
    // a host transfer of `bytes` for unit u, into the same trace
    void note_transfer(const char* op, uint64_t bytes, int u) {
        if (trace) trace->push_back({op, "host", bytes, u});
    }

    virtual const char* backend_name() const = 0;

    // In place: `buf` (count elements) becomes the elementwise sum over ranks.
    virtual void all_reduce_sum(void* buf, size_t count, DType dt, Stream s) = 0;
    // `send` holds world*recvcount elements; this rank receives the sum over ranks
    // of elements [rank*recvcount, (rank+1)*recvcount). In place when
    // recv == send + rank*recvcount.
    virtual void reduce_scatter_sum(const void* send, void* recv, size_t recvcount, DType dt, Stream s) = 0;
    // `recv` gets world*sendcount elements, rank k's `send` at k*sendcount. In
    // place when send == recv + rank*sendcount.
    virtual void all_gather(const void* send, void* recv, size_t sendcount, DType dt, Stream s) = 0;
    // `bytes` of `buf` from `root` to every rank.
    virtual void broadcast(void* buf, size_t bytes, int root, Stream s) = 0;
    virtual void barrier() = 0;

    // Small host-side reductions (losses, norms, overflow flags): blocking, and
    // summed in rank order so every rank gets the same bits.
    virtual double sum_scalar(double x) = 0;
    virtual double max_scalar(double x) = 0;

    // Point-to-point, between pipeline stages: `bytes` of `buf` to or from rank
    // `peer`. A send completes once the peer has received it, so two ranks that
    // send to each other must post both sends before either receive: between
    // group_start() and group_end() the operations are posted together and
    // complete together (NCCL's group semantics). Counted as PointToPoint:
    // sent bytes by the sender, received bytes by the receiver.
    virtual void send(const void* buf, size_t bytes, int peer, Stream s) = 0;
    virtual void recv(void* buf, size_t bytes, int peer, Stream s) = 0;
    virtual void group_start() = 0;
    virtual void group_end() = 0;

    // A sub-communicator, as ncclCommSplit makes one: every rank of this one
    // calls it together; the ranks giving the same color form a group, ranked
    // by key (ties by rank here). The new communicator counts its own bytes,
    // so a tensor group's traffic is told apart from a data group's.
    virtual std::unique_ptr<Comm> split(int color, int key) = 0;

    // A dry run's groups (zero/comm/comm_dry.h) record instead of moving bytes.
    virtual bool dry() const { return false; }

  protected:
    // every collective: its bytes sent and received (the stats) and its whole buffer (the trace)
    void counted(CommOp op, uint64_t sent, uint64_t recv, uint64_t payload) {
        stats.add(op, sent, recv);
        if (trace) trace->push_back({comm_op_name(op), group_name, payload, op == CommOp::Scalar ? -1 : unit});
    }
    // Each collective's bytes as a ring moves them, each direction per rank:
    // all-reduce count + (N-2)|this rank's chunk| = 2(N-1)/N count for even
    // chunks (a reduce-scatter then an all-gather), the other two (N-1)/N of
    // the whole buffer, a broadcast the buffer once from the root. (The emulated
    // backend reads exactly these from its peers.)
    void counted_all_reduce(size_t count, DType dt) {
        const size_t chunk = count * (rank + 1) / world - count * rank / world;
        const uint64_t moved = world == 1 ? 0 : (count + (uint64_t)(world - 2) * chunk) * dtype_size(dt);
        counted(CommOp::AllReduce, moved, moved, count * dtype_size(dt));
    }
    void counted_reduce_scatter(size_t recvcount, DType dt) {
        const uint64_t moved = (uint64_t)(world - 1) * recvcount * dtype_size(dt);
        counted(CommOp::ReduceScatter, moved, moved, (uint64_t)world * recvcount * dtype_size(dt));
    }
    void counted_all_gather(size_t sendcount, DType dt) {
        const uint64_t moved = (uint64_t)(world - 1) * sendcount * dtype_size(dt);
        counted(CommOp::AllGather, moved, moved, (uint64_t)world * sendcount * dtype_size(dt));
    }
    void counted_broadcast(size_t bytes, int root) {
        counted(CommOp::Broadcast, rank == root ? bytes : 0, rank == root ? 0 : bytes, bytes);
    }
    void counted_scalar() {
        const uint64_t moved = (uint64_t)(world - 1) * sizeof(double);
        counted(CommOp::Scalar, moved, moved, sizeof(double));
    }
    // a send or a receive as it is posted (the trace; its bytes are counted as it completes)
    void traced_p2p(bool send, uint64_t bytes) {
        if (trace) trace->push_back({send ? "send" : "recv", group_name, bytes, unit});
    }
};

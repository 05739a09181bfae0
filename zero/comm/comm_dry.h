// A dry run's communicator (zero/base/ops.h): each collective, send and
// receive is recorded -- kind, group, bytes, the stream's lane -- and counted
// and traced exactly as the other backends count and trace it, and nothing
// moves. A scalar reduction returns this rank's own value: a dry run's
// values are not the real ones, only its control flow is. There is no one to
// meet: a dry rank runs alone, and its groups are given their place and size
// (run/groups.h) rather than split.
#pragma once

#include <memory>

#include "zero/base/ops.h"
#include "zero/comm/comm.h"

class DryComm : public Comm {
  public:
    DryComm(int rank_, int world_) : Comm(rank_, world_) {}
    const char* backend_name() const override { return "dry"; }
    bool dry() const override { return true; }

    void all_reduce_sum(void* buf, size_t count, DType dt, Stream s) override {
        record("an all-reduce", "all_reduce", count * dtype_size(dt), s, {writes_bytes(buf, count * dtype_size(dt))});
        counted_all_reduce(count, dt);
    }
    void reduce_scatter_sum(const void* send, void* recv, size_t recvcount, DType dt, Stream s) override {
        const size_t esz = dtype_size(dt);
        record("a reduce-scatter", "reduce_scatter", (uint64_t)world * recvcount * esz, s,
               {reads_bytes(send, world * recvcount * esz), writes_bytes(recv, recvcount * esz)});
        counted_reduce_scatter(recvcount, dt);
    }
    void all_gather(const void* send, void* recv, size_t sendcount, DType dt, Stream s) override {
        const size_t bytes = sendcount * dtype_size(dt);
        record("an all-gather", "all_gather", (uint64_t)world * bytes, s,
               {reads_bytes(send, bytes), writes_bytes(recv, world * bytes)});
        counted_all_gather(sendcount, dt);
    }
    void broadcast(void* buf, size_t bytes, int root, Stream s) override {
        record("a broadcast", "broadcast", bytes, s, {rank == root ? reads_bytes(buf, bytes) : writes_bytes(buf, bytes)});
        counted_broadcast(bytes, root);
    }
    void barrier() override {}
    double sum_scalar(double x) override { return scalar(x); }
    double max_scalar(double x) override { return scalar(x); }
    void send(const void* buf, size_t bytes, int peer, Stream s) override {
        traced_p2p(true, bytes);
        record("a send", "send", bytes, s, {reads_bytes(buf, bytes)}, peer);
        stats.add(CommOp::PointToPoint, bytes, 0);
    }
    void recv(void* buf, size_t bytes, int peer, Stream s) override {
        traced_p2p(false, bytes);
        record("a receive", "recv", bytes, s, {writes_bytes(buf, bytes)}, peer);
        stats.add(CommOp::PointToPoint, 0, bytes);
    }
    void group_start() override {}
    void group_end() override {}
    std::unique_ptr<Comm> split(int, int) override {
        fail("internal: a dry run's groups are given their place (run/groups.h), not split");
    }

  private:
    void record(const char* what, const char* kind, uint64_t bytes, Stream s, std::initializer_list<Access> acc,
                int peer = -1) {
        check_on(s, what, acc);
        OpRecorder* r = tl_recorder;
        CHECK(r, "internal: a dry communicator outside a dry run");
        StepOp op;
        op.kind = kind, op.group = group_name, op.bytes = bytes, op.lane = stream_lane(s), op.peer = peer, op.acc = acc;
        if (peer >= 0) op.dims = {(long)bytes};
        r->add(op);
    }
    double scalar(double x) {
        StepOp op;
        op.kind = "scalar", op.group = group_name, op.bytes = sizeof(double), op.lane = Lane::Host;
        tl_recorder->add(op);
        counted_scalar();
        return x;
    }
};

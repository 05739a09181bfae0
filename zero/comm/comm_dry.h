// A dry run's communicator (zero/base/ops.h): Comm records, counts and traces
// each collective, send and receive exactly as for the other backends, and
// nothing moves. A scalar reduction returns this rank's own value: a dry
// run's values are not the real ones, only its control flow is. There is no
// one to meet: a dry rank runs alone, and its groups are given their place
// and size (run/groups.h) rather than split.
#pragma once

#include <memory>
#include <vector>

#include "zero/comm/comm.h"

class DryComm : public Comm {
  public:
    DryComm(int rank_, int world_) : Comm(rank_, world_) {}
    bool dry() const override { return true; }
    void barrier() override {}
    std::unique_ptr<Comm> split(int, int) override {
        fail("internal: a dry run's groups are given their place (run/groups.h), not split");
    }

  protected:
    void run_all_reduce_sum(void*, size_t, DType, Stream) override {}
    void run_reduce_scatter_sum(const void*, void*, size_t, DType, Stream) override {}
    void run_all_gather(const void*, void*, size_t, DType, Stream) override {}
    void run_broadcast(void*, size_t, int, Stream) override {}
    std::vector<double> run_gather_scalar(double x) override { return {x}; }
    void run_send(const void*, size_t, int, Stream) override {}
    void run_recv(void*, size_t, int, Stream) override {}
    void run_group_start() override {}
    void run_group_end() override {}
};

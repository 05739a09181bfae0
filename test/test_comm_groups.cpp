// Sub-communicators of the emulated backend, as the t x d grid uses them: a
// world of t*d ranks split into tensor groups (adjacent ranks) and data groups
// (ranks t apart). Each group's collectives see only its members, ranked by
// key; each communicator counts its own bytes against the ring volumes of its
// own size, and the world's count is untouched.
#include <cstdio>
#include <vector>

#include "test/test_util.h"
#include "zero/comm/comm_emulated.h"
#include "zero/layout/tp_plan.h"

static float value(int rank, size_t i) { return (float)((int)((rank * 37 + i * 11) % 97) - 48) / 8.0f; }

static void check_grid(int t, int d) {
    const int N = t * d;
    const size_t count = 301, slice = 19;
    TpGrid grid(N, t);
    run_emulated_ranks(N, [&](int rank, EmulatedWorld& world) {
        KernelCtx ctx;
        EmulatedComm comm(world, rank, ctx);
        int tp = grid.tp_rank(rank), dp = grid.dp_rank(rank);
        std::unique_ptr<Comm> tensor = comm.split(dp, tp);
        std::unique_ptr<Comm> data = comm.split(tp, dp);
        EXPECT(tensor->world == t && tensor->rank == tp, "t=%d d=%d rank %d: tensor group %d of %d", t, d, rank,
               tensor->rank, tensor->world);
        EXPECT(data->world == d && data->rank == dp, "t=%d d=%d rank %d: data group %d of %d", t, d, rank,
               data->rank, data->world);

        // all-reduce over the tensor group: the sum of its members, in their order
        std::vector<float> buf(count);
        for (size_t i = 0; i < count; i++) buf[i] = value(rank, i);
        tensor->all_reduce_sum(buf.data(), count, DType::F32, nullptr);
        size_t bad = 0;
        for (size_t i = 0; i < count; i++) {
            float sum = 0;
            for (int p = 0; p < t; p++) sum += value(grid.rank_of(dp, p), i);
            bad += buf[i] != sum;
        }
        EXPECT(bad == 0, "t=%d d=%d rank %d: tensor all-reduce wrong in %zu places", t, d, rank, bad);

        // all-gather over the data group: every member's slice in data-rank order
        std::vector<float> mine(slice), all(slice * d);
        for (size_t i = 0; i < slice; i++) mine[i] = value(rank, i);
        data->all_gather(mine.data(), all.data(), slice, DType::F32, nullptr);
        bad = 0;
        for (int q = 0; q < d; q++)
            for (size_t i = 0; i < slice; i++) bad += all[q * slice + i] != value(grid.rank_of(q, tp), i);
        EXPECT(bad == 0, "t=%d d=%d rank %d: data all-gather wrong in %zu places", t, d, rank, bad);

        // scalars stay inside the group too
        double s = data->sum_scalar(rank), want = 0;
        for (int q = 0; q < d; q++) want += grid.rank_of(q, tp);
        EXPECT(s == want, "t=%d d=%d rank %d: data sum_scalar %g, expected %g", t, d, rank, s, want);

        // bytes: each communicator its own, at its own ring volume
        size_t lo = count * tp / t, hi = count * (tp + 1) / t;
        uint64_t ar = t == 1 ? 0 : (count + (uint64_t)(t - 2) * (hi - lo)) * 4;
        uint64_t ag = (uint64_t)(d - 1) * slice * 4;
        EXPECT(tensor->stats.sent[(int)CommOp::AllReduce] == ar && tensor->stats.bulk_sent() == ar,
               "t=%d d=%d rank %d: tensor bytes %llu, expected %llu", t, d, rank,
               (unsigned long long)tensor->stats.bulk_sent(), (unsigned long long)ar);
        EXPECT(data->stats.sent[(int)CommOp::AllGather] == ag && data->stats.bulk_sent() == ag,
               "t=%d d=%d rank %d: data bytes %llu, expected %llu", t, d, rank,
               (unsigned long long)data->stats.bulk_sent(), (unsigned long long)ag);
        EXPECT(comm.stats.bulk_sent() == 0, "t=%d d=%d rank %d: the world counted its groups' bytes", t, d, rank);

        // keys order a group: reversed keys reverse the ranks
        std::unique_ptr<Comm> reversed = comm.split(0, N - 1 - rank);
        EXPECT(reversed->world == N && reversed->rank == N - 1 - rank, "rank %d: reversed key gives rank %d", rank,
               reversed->rank);
        std::vector<float> one(1, (float)rank), every(N);
        reversed->all_gather(one.data(), every.data(), 1, DType::F32, nullptr);
        for (int k = 0; k < N; k++) EXPECT(every[k] == (float)(N - 1 - k), "reversed group slot %d", k);
    });
}

int main() {
    for (int t : {1, 2, 4})
        for (int d : {1, 2}) check_grid(t, d);
    check_grid(3, 2);
    return test_summary("comm_groups");
}

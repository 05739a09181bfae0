// The emulated backend's collectives: results (summed in rank order, so the
// exact fp32 sums are known), in-place and out-of-place forms, every dtype,
// world sizes 1-5 with counts that do not divide evenly, and the bytes each
// rank counts against the ring volumes. Its point-to-point: every rank sending
// to both neighbours in one group while they send to it (a pipeline's steady
// state, which separate blocking sends would deadlock), messages between two
// ranks received in the order sent, and the bytes each side counts.
#include <cstdio>
#include <vector>

#include "test/test_util.h"
#include "zero/comm/comm_emulated.h"

// a value that differs by rank and position, exactly representable in every dtype
static float value(int rank, size_t i) { return (float)((int)((rank * 37 + i * 11) % 97) - 48) / 8.0f; }

template <typename T>
static void check_world(int N) {
    const size_t count = 1000 + 7 * N;  // all-reduce: not a multiple of N
    const size_t slice = 37;            // reduce-scatter / all-gather per rank
    const size_t esz = sizeof(T);
    const char* dt = dtype_name(dtype_of<T>::value);
    std::vector<CommStats> stats(N);
    run_emulated_ranks(N, [&](int rank, EmulatedWorld& world) {
        KernelCtx ctx;
        EmulatedComm comm(world, rank, ctx);
        Stream s = nullptr;

        // all-reduce in place: the fp32 sum over ranks in rank order, rounded once
        std::vector<T> buf(count);
        for (size_t i = 0; i < count; i++) buf[i] = from_float<T>(value(rank, i));
        comm.all_reduce_sum(buf.data(), count, dtype_of<T>::value, s);
        size_t bad = 0;
        for (size_t i = 0; i < count; i++) {
            float sum = 0;
            for (int r = 0; r < N; r++) sum += to_float(from_float<T>(value(r, i)));
            bad += to_float(buf[i]) != to_float(from_float<T>(sum));
        }
        EXPECT(bad == 0, "%s N=%d rank %d: all_reduce wrong in %zu places", dt, N, rank, bad);

        // reduce-scatter, out of place and in place
        std::vector<T> full(slice * N), out(slice);
        for (size_t i = 0; i < full.size(); i++) full[i] = from_float<T>(value(rank, i + 5));
        std::vector<T> in_place = full;
        comm.reduce_scatter_sum(full.data(), out.data(), slice, dtype_of<T>::value, s);
        comm.reduce_scatter_sum(in_place.data(), in_place.data() + rank * slice, slice, dtype_of<T>::value, s);
        bad = 0;
        for (size_t i = 0; i < slice; i++) {
            float sum = 0;
            for (int r = 0; r < N; r++) sum += to_float(from_float<T>(value(r, rank * slice + i + 5)));
            bad += to_float(out[i]) != to_float(from_float<T>(sum));
            bad += to_float(in_place[rank * slice + i]) != to_float(out[i]);
        }
        EXPECT(bad == 0, "%s N=%d rank %d: reduce_scatter wrong in %zu places", dt, N, rank, bad);

        // all-gather, out of place and in place
        std::vector<T> mine(slice), gathered(slice * N), gathered_in_place(slice * N);
        for (size_t i = 0; i < slice; i++) mine[i] = gathered_in_place[rank * slice + i] = from_float<T>(value(rank, i));
        comm.all_gather(mine.data(), gathered.data(), slice, dtype_of<T>::value, s);
        comm.all_gather(gathered_in_place.data() + rank * slice, gathered_in_place.data(), slice, dtype_of<T>::value, s);
        bad = 0;
        for (int r = 0; r < N; r++)
            for (size_t i = 0; i < slice; i++) {
                float want = to_float(from_float<T>(value(r, i)));
                bad += to_float(gathered[r * slice + i]) != want;
                bad += to_float(gathered_in_place[r * slice + i]) != want;
            }
        EXPECT(bad == 0, "%s N=%d rank %d: all_gather wrong in %zu places", dt, N, rank, bad);

        // broadcast from the last rank
        std::vector<int> b(13, rank);
        comm.broadcast(b.data(), b.size() * sizeof(int), N - 1, s);
        EXPECT(b[0] == N - 1 && b[12] == N - 1, "%s N=%d rank %d: broadcast", dt, N, rank);

        // scalars: the same bits on every rank
        double sum = comm.sum_scalar(0.1 * (rank + 1));
        double want = 0.0;
        for (int r = 0; r < N; r++) want += 0.1 * (r + 1);
        EXPECT(sum == want, "%s N=%d rank %d: sum_scalar %.17g, want %.17g", dt, N, rank, sum, want);
        EXPECT(comm.max_scalar(rank == 0 ? INFINITY : rank) == INFINITY, "max_scalar must see an inf");
        stats[rank] = comm.stats;
    });

    // bytes: what a ring moves, per rank
    for (int rank = 0; rank < N; rank++) {
        const CommStats& st = stats[rank];
        size_t lo = count * rank / N, hi = count * (rank + 1) / N;
        uint64_t ar = N == 1 ? 0 : (count + (uint64_t)(N - 2) * (hi - lo)) * esz;  // = 2(N-1)/N count for even chunks
        uint64_t rs = 2 * (uint64_t)(N - 1) * slice * esz, ag = rs;                 // two calls each
        EXPECT(st.sent[(int)CommOp::AllReduce] == ar && st.recv[(int)CommOp::AllReduce] == ar,
               "%s N=%d rank %d: all_reduce counted %llu, want %llu", dt, N, rank,
               (unsigned long long)st.sent[(int)CommOp::AllReduce], (unsigned long long)ar);
        EXPECT(st.sent[(int)CommOp::ReduceScatter] == rs && st.recv[(int)CommOp::ReduceScatter] == rs,
               "%s N=%d rank %d: reduce_scatter counted %llu, want %llu", dt, N, rank,
               (unsigned long long)st.sent[(int)CommOp::ReduceScatter], (unsigned long long)rs);
        EXPECT(st.sent[(int)CommOp::AllGather] == ag && st.recv[(int)CommOp::AllGather] == ag,
               "%s N=%d rank %d: all_gather counted %llu, want %llu", dt, N, rank,
               (unsigned long long)st.sent[(int)CommOp::AllGather], (unsigned long long)ag);
        uint64_t bc = 13 * sizeof(int);
        EXPECT(st.sent[(int)CommOp::Broadcast] == (rank == N - 1 ? bc : 0) &&
                   st.recv[(int)CommOp::Broadcast] == (rank == N - 1 ? 0 : bc),
               "%s N=%d rank %d: broadcast bytes", dt, N, rank);
        if (N % 2 == 0 && count % N == 0)
            EXPECT(ar == 2 * (uint64_t)(N - 1) * count / N * esz, "ring volume");
    }
}

static void check_point_to_point(int N) {
    const size_t n = 19;
    std::vector<CommStats> stats(N);
    run_emulated_ranks(N, [&](int rank, EmulatedWorld& world) {
        KernelCtx ctx;
        EmulatedComm comm(world, rank, ctx);
        int next = (rank + 1) % N, prev = (rank + N - 1) % N;
        std::vector<float> to_next(n), to_prev(n), from_next(n, -1), from_prev(n, -1);
        for (size_t i = 0; i < n; i++) to_next[i] = value(rank, i), to_prev[i] = -value(rank, i);
        for (int round = 0; round < 3; round++) {  // three exchanges in a row, each one group
            comm.group_start();
            comm.send(to_next.data(), n * sizeof(float), next, nullptr);
            comm.send(to_prev.data(), n * sizeof(float), prev, nullptr);
            comm.recv(from_prev.data(), n * sizeof(float), prev, nullptr);
            comm.recv(from_next.data(), n * sizeof(float), next, nullptr);
            comm.group_end();
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += from_prev[i] != value(prev, i) || from_next[i] != -value(next, i);
        EXPECT(bad == 0, "N=%d rank %d: the exchange with both neighbours is wrong in %zu places", N, rank, bad);
        // two messages from rank 0 to rank 1, sent and received one by one: in order
        if (rank < 2) {
            std::vector<int> a = {1, 2, 3}, b = {4, 5, 6}, got(3);
            if (rank == 0) comm.send(a.data(), 3 * sizeof(int), 1, nullptr), comm.send(b.data(), 3 * sizeof(int), 1, nullptr);
            if (rank == 1) {
                comm.recv(got.data(), 3 * sizeof(int), 0, nullptr);
                EXPECT(got == a, "N=%d: the first message received second", N);
                comm.recv(got.data(), 3 * sizeof(int), 0, nullptr);
                EXPECT(got == b, "N=%d: the second message received first", N);
            }
        }
        stats[rank] = comm.stats;
    });
    for (int rank = 0; rank < N; rank++) {
        uint64_t ring = 3 * 2 * n * sizeof(float), pair = 2 * 3 * sizeof(int);
        uint64_t sent = ring + (rank == 0 ? pair : 0), recv = ring + (rank == 1 ? pair : 0);
        const CommStats& st = stats[rank];
        EXPECT(st.sent[(int)CommOp::PointToPoint] == sent && st.recv[(int)CommOp::PointToPoint] == recv &&
                   st.bulk_sent() == sent,
               "N=%d rank %d: point-to-point counted %llu sent, %llu received, want %llu and %llu", N, rank,
               (unsigned long long)st.sent[(int)CommOp::PointToPoint], (unsigned long long)st.recv[(int)CommOp::PointToPoint],
               (unsigned long long)sent, (unsigned long long)recv);
    }
}

int main() {
    for (int N = 2; N <= 5; N++) check_point_to_point(N);
    for (int N = 1; N <= 5; N++) {
        check_world<float>(N);
        check_world<bf16>(N);
        check_world<f16>(N);
    }
    return test_summary("comm_emulated");
}

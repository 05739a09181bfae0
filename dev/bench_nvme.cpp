// Benchmark of the NVMe offload's disk traffic (zero/engine/disk_states.h)
// against plain sequential I/O on the same disk, measured in the same run.
//
// build: make bench_nvme   (build/bench_nvme, with the CPU build's flags)
// run:   build/bench_nvme DIR [GiB=2] [buffers=4] [threads=1] [queue_depth=8] [block_kib=1024]
//
// plain: one thread writes a preallocated file of that size sequentially in
// 1 MiB O_DIRECT requests (then fdatasync), then reads it back the same way:
// the disk's rates for one stream of requests, without the page cache. It runs
// before and after the engine; the better of the two counts. Then the same
// with the engine's request size and threads x queue_depth requests at once:
// the rates --calibrate gives the step-time model.
// engine: DiskStates over the same bytes in tiles of 4M elements (16 MiB per
// state, 48 MiB a tile): write() of the states (start-up), then 3 steps of
// prefetch(0), begin/end over every tile with nothing computed, drain(). A
// step reads and writes every byte of the file once.
//
// "engine / plain sequential" is the time a step would take with its reads and
// its writes one after the other at the plain rates (bytes read / read rate +
// bytes written / write rate), over the engine's step time. Above 1: reads
// ahead and writes behind in flight together, and many requests at once, beat
// one sequential stream. Below 1: the ring costs more than it overlaps. Where
// the disk refuses O_DIRECT both sides go through the page cache (the plain
// side drops it between its write and its read); the output says so.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zero/perf/disk_rates.h"

namespace {

constexpr size_t MiB = 1 << 20;
constexpr size_t TILE_N = 4 << 20;  // elements of a tile

double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [GiB=2] [buffers=4] [threads=1] [queue_depth=8] [block_kib=1024]\n", argv[0]);
        return 2;
    }
    auto arg = [&](int i, double fallback) { return argc > i ? atof(argv[i]) : fallback; };
    DiskConfig cfg;
    cfg.dir = argv[1];
    const double gib = arg(2, 2);
    cfg.buffers = (int)arg(3, 4), cfg.threads = (int)arg(4, 1), cfg.queue_depth = (int)arg(5, 8);
    cfg.block_bytes = (size_t)arg(6, 1024) * 1024;
    const size_t tile_bytes = 3 * DiskStates::state_bytes(TILE_N);
    const int T = std::max(1, (int)(gib * 1024 * MiB / tile_bytes + 0.5));
    std::vector<DiskTile> tiles;
    for (int t = 0; t < T; t++) tiles.push_back({(size_t)t * TILE_N, TILE_N});
    const size_t bytes = DiskStates::file_bytes(tiles);
    printf("%s: %.2f GiB (%d tiles of 3 x 16 MiB), ring of %d buffers (%.0f MiB), %d x %d I/O workers, %zu KiB requests\n",
           cfg.dir.c_str(), bytes / (1024.0 * MiB), T, cfg.buffers, DiskStates::ring_bytes(cfg.buffers, TILE_N) / (double)MiB,
           cfg.threads, cfg.queue_depth, cfg.block_bytes / 1024);

    bool direct = false;
    double pw[2], pr[2];
    const std::string plain_file = cfg.dir + "/bench_nvme_plain.bin";
    plain_disk_rates(plain_file, bytes, MiB, 1, direct, pw[0], pr[0]);
    if (!direct) printf("note: %s does not take O_DIRECT: every number below went through the page cache\n", argv[1]);

    double startup_gbps = 0, best_step = 1e30;
    {
        MemoryAccountant mem(0);
        DiskStates ds(cfg, 0, tiles, mem);
        std::vector<float> src(TILE_N);
        for (size_t i = 0; i < TILE_N; i++) src[i] = (float)i;
        HostClock clock;
        for (int s = 0; s < 3; s++)
            for (int t = 0; t < T; t++) ds.write(s, tiles[t].offset, TILE_N, src.data());
        startup_gbps = gbps((double)bytes, clock.seconds());
        printf("\n%-6s %10s %10s %14s\n", "step", "ms", "GB/s", "begin wait ms");
        for (int step = 0; step < 3; step++) {
            double wait_s = 0;
            clock = HostClock{};
            ds.prefetch(0);
            for (int t = 0; t < T; t++) {
                HostClock in_begin;
                ds.begin(t);
                wait_s += in_begin.seconds();
                ds.end(t);
            }
            ds.drain();
            const double s = clock.seconds();
            best_step = std::min(best_step, s);
            printf("%-6d %10.1f %10.2f %14.1f\n", step, s * 1e3, gbps(2.0 * bytes, s), wait_s * 1e3);
        }
    }
    plain_disk_rates(plain_file, bytes, MiB, 1, direct, pw[1], pr[1]);
    double cw = 0, cr = 0;  // what --calibrate gives the step-time model: the engine's requests, as many at once
    plain_disk_rates(plain_file, bytes, cfg.block_bytes, cfg.workers(), direct, cw, cr);
    const double write_rate = std::max(pw[0], pw[1]), read_rate = std::max(pr[0], pr[1]);
    const double plain_step = bytes / (read_rate * 1e9) + bytes / (write_rate * 1e9);

    printf("\n%-44s %8s\n", "", "GB/s");
    printf("%-44s %8.2f   (runs: %.2f, %.2f)\n", "plain sequential write (1 thread, 1 MiB)", write_rate, pw[0], pw[1]);
    printf("%-44s %8.2f   (runs: %.2f, %.2f)\n", "plain sequential read (1 thread, 1 MiB)", read_rate, pr[0], pr[1]);
    printf("%-44s %8.2f / %.2f\n", "write / read at the engine's requests at once", cw, cr);
    printf("%-44s %8.2f\n", "engine write() of the states (start-up)", startup_gbps);
    printf("%-44s %8.2f\n", "engine step, best of 3 (read + write bytes)", gbps(2.0 * bytes, best_step));
    printf("%-44s %8.2f\n", "plain step (read, then write, at those rates)", gbps(2.0 * bytes, plain_step));
    printf("\nengine / plain sequential = %.2f\n", plain_step / best_step);
    return 0;
}

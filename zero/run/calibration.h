// `--calibrate FILE`: this run's operations timed where the trainer launches
// them, into the measured profile FILE (zero/perf/profile.h) that --predict
// reads (zero/README.md, "The step-time model"). The closures of a captured
// step (zero/base/ops.h, zero/run/dry_run.h) run each distinct operation of the
// steady-state step again alone, by min(ranks, the CPU's cores or 8 on a GPU)
// ranks at once, each its own, in batches (zero/perf/calibrate.h); the
// collectives are timed in an emulated world of the run's size and groups.
// With NVMe offload the disk's read and write rates are measured on
// --nvme_path with the run's request size and as many requests at once as its
// ranks' I/O threads keep in flight (its reads and writes are not replayed).
// Nothing here looks at a step's time. Shapes already in FILE are not timed
// again, so one file can gather many runs' shapes.
#pragma once

#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "zero/perf/calibrate.h"
#include "zero/perf/disk_rates.h"
#include "zero/run/dry_run.h"

// What the ranks of one calibration share: the distinct operations any rank
// found (a pipeline's stages run different ones), which ranks hold each,
// every timing of each, and the collectives of each group size.
struct CalibrationTable {
    std::mutex mu;
    std::vector<std::string> keys;                       // the distinct operations, in the order found
    std::map<std::string, std::vector<int>> holders;     // each key's ranks
    std::map<std::string, std::vector<double>> seconds;  // each key's time, one per rank that ran it
    std::map<int, std::vector<std::pair<std::string, uint64_t>>> collectives;  // group size -> (op, bytes)
    std::map<std::string, StepOp> copies;  // copies with no closure to replay (a read-back's vector dies), receives
};

// The steady-state step's operations of a captured rank, each timed alone (see the header).
template <typename T>
void time_captured(const TrainOptions& o, const RunSetup& run, Comm& world, int at_once, CalibrationTable& table,
                   const OpRecorder& rec, Rank<T>& r) {
    using namespace calibrate_detail;
    NotRecorded timing;
    std::map<std::string, size_t> mine;  // key -> its first capture in the steady state
    for (size_t i = 0; i < rec.ops.size(); i++)
        if (rec.ops[i].step == 1 && rec.runs[i] && !mine.count(rec.ops[i].key())) mine[rec.ops[i].key()] = i;
    {
        std::lock_guard<std::mutex> lock(table.mu);
        const MemoryQuery q = run.memory_query(o, r.stage);
        for (const StepOp& op : rec.ops) {
            if (op.step != 1) continue;
            const std::string key = op.key();
            if (mine.count(key)) {
                std::vector<int>& h = table.holders[key];
                if (h.empty()) table.keys.push_back(key);
                if (std::find(h.begin(), h.end(), world.rank) == h.end()) h.push_back(world.rank);
            } else if (op.transfer() || op.kind == OpKind::Copy || op.kind == OpKind::Zero || op.kind == OpKind::Recv) {
                table.copies[key] = op;  // (a receive is timed as a device copy of its bytes)
            } else if (op.collective() || op.kind == OpKind::Broadcast) {  // each group size's, timed apart
                std::pair<std::string, uint64_t> call{op.name, op.bytes};
                auto& c = table.collectives[group_size(op.group, q)];
                if (std::find(c.begin(), c.end(), call) == c.end()) c.push_back(call);
            }
        }
    }
    world.barrier();
    // each distinct operation run again by the first at_once of the ranks that hold it, at once (each its own)
    for (const std::string& key : table.keys) {
        world.barrier();
        auto it = mine.find(key);
        const std::vector<int>& h = table.holders.at(key);
        const long before_me = std::count_if(h.begin(), h.end(), [&](int k) { return k < world.rank; });
        if (it != mine.end() && before_me < at_once) {
            const std::function<void()>& finish = rec.finishes[it->second];  // (the op's own stream)
            double t = time_calls(rec.runs[it->second], [&] { if (finish) finish(); });
            std::lock_guard<std::mutex> lock(table.mu);
            table.seconds[key].push_back(t);
        }
        world.barrier();
    }
    // the copies with nothing to replay, between buffers of their own, by the first at_once ranks at
    // once like the rest (the table keeps times of that many sharing the device); a receive is a
    // device copy of its bytes from the sender's buffer
    std::vector<StepOp> unreplayed;
    for (const auto& [key, op] : table.copies)
        if (!table.seconds.count(key)) unreplayed.push_back(op);
    for (const StepOp& op : unreplayed) {  // (the barrier that ends each replay or copy orders the next)
        const size_t bytes = op.bytes;
        const bool timer = world.rank < at_once;
        char* x = !timer ? nullptr : (char*)(op.kind == OpKind::ToDevice ? host_malloc(bytes) : device_malloc(bytes));
        char* y = !timer ? nullptr : (char*)(op.kind == OpKind::ToHost ? host_malloc(bytes) : device_malloc(bytes));
        world.barrier();  // (every rank's allocations made before any times)
        if (timer) {
            Stream s = r.ctx.stream;
            double t = time_calls([&] { op.kind == OpKind::Zero ? device_zero(y, bytes, s) : device_copy(y, x, bytes, s); },
                                  [&] { stream_sync(s); });
            std::lock_guard<std::mutex> lock(table.mu);
            table.seconds[op.key()].push_back(t);
        }
        world.barrier();
        if (timer) {
            op.kind == OpKind::ToDevice ? host_free(x) : device_free(x);
            op.kind == OpKind::ToHost ? host_free(y) : device_free(y);
        }
    }
}

// The whole calibration: the emulated ranks, then the collectives, merged into FILE.
template <typename T>
void calibrate_profile(const TrainOptions& o, const RunSetup& run, const char* dtype, std::FILE* log) {
    using namespace calibrate_detail;
    CHECK(run.launch.world == 1, "--calibrate times emulated ranks in one process (--ranks N), not a launched job");
    const std::string path = o.calibrate;
    Profile p;
    if (file_exists(path)) p = load_profile(path);
    CHECK(p.path.empty() || p.measured, "%s is a profile from specifications: calibrate into another file",
          path.c_str());
    CHECK(p.path.empty() || p.dtype == dtype, "%s was calibrated in %s, this run computes in %s", path.c_str(),
          p.dtype.c_str(), dtype);
    const int cores = process_cpu_threads();
#ifdef ZERO_CUDA
    const int most = 8;  // emulated ranks on one GPU: timed with up to 8 at once
    p.synchronous = false, p.name = "gpu";
#else
    const int most = cores;
    p.synchronous = true, p.name = "cpu";
#endif
    p.measured = true, p.device = device_name(), p.dtype = dtype, p.cores = cores;
    p.about = "measured by --calibrate on this machine";
    HostClock clock;
    const int at_once = std::min(run.world, most);
    CalibrationTable table;
    run_emulated_ranks(run.world, [&](int rank, EmulatedWorld& w) {
        KernelCtx comm_ctx;
        EmulatedComm comm(w, rank, comm_ctx);
        set_threads(run.cpu_threads_per_rank());
        // its steps captured (zero/run/dry_run.h), then, while it still holds its buffers, its
        // steady-state step's operations timed
        OpRecorder rec(Recording::Capture);
        record_rank<T>(o, run, comm, rec, [&](Rank<T>& r, int step) {
            if (step == 1) time_captured(o, run, comm, at_once, table, rec, r);
        });
    }, o.timeout_s > 0 ? o.timeout_s : COLLECTIVE_TIMEOUT_S);
    std::map<std::string, double>& kernels = p.kernels["r" + std::to_string(at_once)];
    int timed = 0;
    for (const auto& t : table.seconds) {
        if (kernels.count(t.first)) continue;
        kernels[t.first] = std::accumulate(t.second.begin(), t.second.end(), 0.0) / t.second.size(), timed++;
    }
    const int threads = run.cpu_threads_per_rank();
    for (const auto& g : table.collectives) {
        std::string cctx = "N" + std::to_string(run.world) + "g" + std::to_string(g.first);
        std::vector<std::pair<std::string, uint64_t>> fresh;
        for (const auto& c : g.second)
            if (!p.collectives[cctx].count(c.first + " " + std::to_string(c.second))) fresh.push_back(c);
        if (!fresh.empty()) time_collectives<T>(fresh, run.world, g.first, threads, p.collectives[cctx]);
        timed += (int)fresh.size();
    }
    measure_ceilings<T>(p, cores);
    if (run.nvme && p.disk_read_gbs == 0) {  // NVMe offload: the disk driven as the run's ranks drive it
        bool direct = false;
        const int in_flight = std::min(256, run.world * run.disk.workers());
        plain_disk_rates(o.nvme_path + "/calibrate_disk.bin", (size_t)1 << 30, run.disk.block_bytes, in_flight, direct,
                         p.disk_write_gbs, p.disk_read_gbs);
    }
    save_profile(p, path);
    fprintf(log, "calibrated %d operations (%d ranks at once, %d thread(s) each) in %.1f s into %s\n", timed, at_once,
            threads, clock.seconds(), path.c_str());
}

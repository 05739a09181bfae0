// --trace FILE in a run: the run's first steady step (its second; with a
// delayed update of W steps its (W+2)-th), captured as it runs by a recorder
// with a clock (zero/base/ops.h) that is the rank's from before its first
// allocation, and written as a timeline (zero/perf/trace.h). In the traced step
// host tasks run on the rank's thread as they are queued (zero/engine/
// host_tasks.h); the trace says so, and the log sets the step's time beside the
// next one's. Emulated ranks write one file; under a launcher each rank its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zero/perf/peak_flops.h"
#include "zero/perf/trace.h"
#include "zero/run/run_setup.h"

// --trace where nothing would be traced: one line, before anything runs.
inline void check_trace_flags(const TrainOptions& o) {
    if (o.trace.empty()) return;
    const char* mode = o.params != 0 ? "--params" : !o.sample.empty() ? "--sample" : o.pp_schedule_print ? "--pp_schedule_print"
                       : !o.predict.empty() ? nullptr : !o.calibrate.empty() ? "--calibrate" : o.estimate ? "--estimate 1"
                       : !o.consolidate.empty() || !o.export_hf.empty() ? "a conversion" : nullptr;
    CHECK(!mode, "--trace writes a training step, or with --predict PROFILE a predicted one; %s runs neither", mode);
    CHECK(!o.dry_run || !o.predict.empty(), "--trace of a dry run needs --predict PROFILE: the profile gives its "
          "operations their times");
    CHECK(!o.predict.empty() || o.max_steps < 0 || o.max_steps >= o.offload_delay_steps + 2,
          "--trace writes the run's first steady step, step %d (the first warms up%s): -x %d runs too few",
          o.offload_delay_steps + 2, o.offload_delay_steps ? ", then the delayed update fills" : "", o.max_steps);
}

class StepTrace {
  public:
    StepTrace(const TrainOptions& o, const RunSetup& run, int rank) : path(o.trace), launched(run.launch.world > 1) {
        if (path.empty()) return;
        clock = std::make_unique<OpClock>();
        rec.stamps = clock.get();
        tl_recorder = &rec;
        me.rank = rank, me.stage = run.grid().stage(rank), me.line = rank % (run.dp * run.tp);
        me.name = "rank " + std::to_string(rank) + (run.pp > 1 ? ", stage " + std::to_string(me.stage) : "") +
                  (run.world > 1 ? ", data rank " + std::to_string(run.grid().dp_rank(rank)) : "") +
                  (run.tp > 1 ? ", tensor rank " + std::to_string(run.grid().tp_rank(rank)) : "");
        if (launched) {
            const bool json = path.size() > 5 && path.substr(path.size() - 5) == ".json";
            path = path.substr(0, path.size() - (json ? 5 : 0)) + "_rank" + std::to_string(rank) + (json ? ".json" : "");
        }
        if (rank == 0 || launched) {  // found unwritable now, not after the step
            make_dir_for(path);
            AtomicFile probe(path);  // (never committed: leaves nothing)
        }
    }
    ~StepTrace() {
        if (tl_recorder == &rec) tl_recorder = nullptr;
    }
    StepTrace(const StepTrace&) = delete;
    StepTrace& operator=(const StepTrace&) = delete;

    // Before step `step` of a run that started at `start` and ends before `total`.
    void before(int step, int start, int total, int delay_steps) {
        traced = !path.empty() && tl_recorder == &rec && step == std::min(start + delay_steps + 1, total - 1);
        if (traced) first = rec.ops.size(), rec.step = 1;
    }
    // After it, every rank together: its ops and their times kept, the recorder let go, the file written.
    void after(Comm& world, double step_s, FILE* log) {
        if (traced_s > 0 && (world.rank == 0 || launched))  // the step after the traced one: what tracing cost
            fprintf(log, "the traced step took %.2f ms, the step after it %.2f ms\n", 1e3 * traced_s, 1e3 * step_s);
        traced_s = 0;
        if (!traced) return;
        tl_recorder = nullptr, traced = false, traced_s = step_s;
        me.ops = rec.ops_from(first);
        std::vector<double> start, end;
        std::vector<int> place;
        for (int wait = 0;; wait++) {  // the disk's writes behind and reads ahead end after the step: waited for
            clock->read(start, end, place);
            start.resize(rec.ops.size(), NAN), end.resize(rec.ops.size(), NAN), place.resize(rec.ops.size(), -1);
            bool pending = false;
            for (size_t i = first; i < rec.ops.size(); i++) pending = pending || (rec.ops[i].disk() && std::isnan(end[i]));
            if (!pending || wait == 3000) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        me.start.assign(start.begin() + first, start.end()), me.end.assign(end.begin() + first, end.end());
        for (size_t i = 0; i < me.ops.size(); i++) {  // concurrent work on tracks of its own
            const StepOp& op = me.ops[i];
            const int at = place[first + i];
            me.track.push_back(op.p2p() ? PIPE_TRACK + 2 * op.peer + (op.kind == OpKind::Recv)
                               : op.disk() && at >= 0 ? DISK_BUFFER_TRACK + at : (int)op.lane);
        }
        rec.ops.clear(), rec.runs.clear(), rec.finishes.clear();
        Gathered& g = gathered();
        {
            std::lock_guard<std::mutex> lock(g.mu);
            g.ranks.push_back(me);
        }
        world.barrier();  // (every rank's is in: no one writes them from here)
        if (world.rank != 0 && !launched) return;  // (emulated: rank 0 writes every rank's)
        std::vector<TracedRank> ranks = g.ranks;
        std::sort(ranks.begin(), ranks.end(), [](const TracedRank& a, const TracedRank& b) { return a.rank < b.rank; });
        write_trace(path, ranks, "measured: every op as it ran (" + device_name() + ")", threads, step_s);
        fprintf(log, "trace of the step as it ran: %s (ui.perfetto.dev, or Chromium's DevTools Performance panel, opens it)\n", path.c_str());
    }

  private:
    std::string path;
    const bool launched;  // one rank per process: each writes its own
    OpRecorder rec{Recording::Capture};
    std::unique_ptr<OpClock> clock;
    TracedRank me;
    size_t first = 0;
    bool traced = false;
    double traced_s = 0;  // the traced step's time, until the next step's is known
#ifdef ZERO_CUDA
    const char* threads = "streams on the device; the rank's host tasks and delayed update ran on its thread as they "
                          "were queued (tracing does that: untraced, their own threads run them)";
#else
    const char* threads = "every lane but the disk's is the rank's thread (the CPU build): one op at a time, in list "
                          "order; the disk's I/O threads a track per ring buffer";
#endif
    struct Gathered {  // the process's ranks' steps
        std::mutex mu;
        std::vector<TracedRank> ranks;
    };
    static Gathered& gathered() {
        static Gathered g;
        return g;
    }
};

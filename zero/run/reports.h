// What a run prints: its header (the batch, the grid, the offload paths),
// the matmul peak behind MFU, a line per step, and with --mem_report 1 each
// rank's memory after forward, after backward and after the optimizer step
// (the homework's table) next to the predictor's numbers with the bytes each
// collective moved, printed a line per rank and appended to CSV files in the
// output directory.
#pragma once

#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "zero/base/common.h"
#include "zero/base/memory.h"
#include "zero/base/variants.h"
#include "zero/comm/comm.h"
#include "zero/run/groups.h"
#include "zero/engine/memory_predictor.h"
#include "zero/engine/zero_engine.h"
#include "zero/perf/peak_flops.h"
#include "zero/run/run_setup.h"

struct PhaseMemory {
    MemCounts forward, backward, step;  // live bytes at the end of each phase
};

// The process's peak resident memory (VmHWM), bytes; 0 where /proc is not there.
// Every rank's host arena (and, in the CPU build, its "device" arena) is in it,
// and so is what no arena counts: one unit's fp32 values while the parameters
// load (4 bytes an element of the largest unit: 0.8 GiB at C 4096; with tensor
// parallelism the whole unit it is cut from as well); the rounding chunk, the
// libraries, the data loader, the threads' stacks (together 11 MiB in the CPU
// build, test_zero_memory); on a GPU, the CUDA context's host side. The fit
// check's host margin is for that.
inline double process_peak_resident_bytes() { return proc_kb_field_bytes("/proc/self/status", "VmHWM"); }

// comm: the data-parallel traffic (ZeRO's); tensor: the tensor group's, when there is one;
// pipeline: the pipeline's (the stages' sends and receives, the tied embeddings').
// device_used: cudaMemGetInfo's used bytes now (0: not a GPU); device_used_at_start:
// the same before the run allocated anything (the CUDA context already open), so
// that the growth since then can be set beside what the accountant reserved.
inline void print_memory_line(int rank, const PhaseMemory& m, const MemoryPrediction& pred,
                              const MemoryAccountant& mem, const CommStats& comm, size_t device_used,
                              const CommStats* tensor, size_t device_used_at_start, const CommStats* pipeline) {
    const double MiB = 1048576.0, resident = process_peak_resident_bytes();
    for (int a = 0; a < NUM_ARENAS; a++) {
        Arena arena = (Arena)a;
        if (mem.reserved_bytes().total(arena) == 0) continue;
        printf("  mem rank %d %-6s | after fwd %9.2f MiB (pred %9.2f) | after bwd %9.2f MiB (pred %9.2f) | after step "
               "%9.2f MiB (pred %9.2f) | peak %9.2f | reserved %9.2f",
               rank, arena_name(arena), m.forward.total(arena) / MiB, pred.after_forward.total(arena) / MiB,
               m.backward.total(arena) / MiB, pred.after_backward.total(arena) / MiB, m.step.total(arena) / MiB,
               pred.after_step.total(arena) / MiB, mem.peak_live(arena) / MiB, mem.reserved_bytes().total(arena) / MiB);
        // the host: what the process really holds beside it (all ranks, as they share the process)
        if (arena == Arena::Host && resident > 0) printf(" | process resident peak %.2f MiB", resident / MiB);
        if (arena == Arena::Device && device_used) {
            printf(" | device used %.2f MiB", device_used / MiB);
            if (device_used_at_start)
                printf(" (%+.2f since start-up)", ((double)device_used - (double)device_used_at_start) / MiB);
        }
        for (const auto& [name, st] : {std::pair<const char*, const CommStats*>{"comm", &comm},
                                       {"tensor-parallel", tensor}, {"pipeline", pipeline}})
            if (arena == Arena::Device && st)
                printf(" | %s sent %.2f MiB recv %.2f MiB", name, st->bulk_sent() / MiB, st->bulk_recv() / MiB);
        printf("\n");
    }
    fflush(stdout);
}

// Optimizer offload: where the step's host time went, and the CPU AdamW's rate
// over the n parameters this rank updates. With a delayed update the AdamW ran
// on its own thread during this step; the step waited for what was left of it.
inline void print_offload_line(int rank, const OffloadTimes& t, size_t n) {
    printf("  offload rank %d | waiting for the device %.1f ms | host adds after it %.1f ms | norm %.1f ms | ", rank,
           t.device_ms, t.host_adds_ms, t.norm_ms);
    if (t.delayed) printf("waiting for the delayed update %.1f ms | its ", t.update_wait_ms);
    printf("CPU AdamW %.1f ms (%.2f G params/s)\n", t.adamw_ms, t.adamw_ms > 0 ? n / (t.adamw_ms * 1e6) : 0.0);
    fflush(stdout);
}

// Rows step,rank,phase,arena,<live bytes per kind>,live_total,predicted_total,peak,reserved,device_used
inline void append_memory_csv(const std::string& path, int step, int rank, const PhaseMemory& m,
                              const MemoryPrediction& pred, const MemoryAccountant& mem, size_t device_used) {
    bool fresh = !file_exists(path);
    FILE* f = open_file(path, "a");
    if (fresh) {
        fprintf(f, "step,rank,phase,arena");
        for (int k = 0; k < NUM_MEM_KINDS; k++) fprintf(f, ",%s", mem_kind_name((MemKind)k));
        fprintf(f, ",live_total,predicted_total,peak,reserved,device_used\n");
    }
    struct Phase {
        const char* name;
        const MemCounts& live;
        const MemCounts& predicted;
    };
    const Phase phases[3] = {{"forward", m.forward, pred.after_forward},
                             {"backward", m.backward, pred.after_backward},
                             {"step", m.step, pred.after_step}};
    for (const Phase& ph : phases)
        for (int a = 0; a < NUM_ARENAS; a++) {
            Arena arena = (Arena)a;
            if (mem.reserved_bytes().total(arena) == 0) continue;
            fprintf(f, "%d,%d,%s,%s", step, rank, ph.name, arena_name(arena));
            for (int k = 0; k < NUM_MEM_KINDS; k++) fprintf(f, ",%zu", ph.live.get(arena, (MemKind)k));
            fprintf(f, ",%zu,%zu,%zu,%zu,%zu\n", ph.live.total(arena), ph.predicted.total(arena), mem.peak_live(arena),
                    mem.reserved_bytes().total(arena), arena == Arena::Device ? device_used : 0);
        }
    fclose(f);
}

// Rows step,rank,op,calls,bytes_sent,bytes_recv: every collective of this rank, as its backend counted them.
inline void append_comm_csv(const std::string& path, int step, int rank, const CommStats& st) {
    bool fresh = !file_exists(path);
    FILE* f = open_file(path, "a");
    if (fresh) fprintf(f, "step,rank,op,calls,bytes_sent,bytes_recv\n");
    for (int op = 0; op < NUM_COMM_OPS; op++)
        fprintf(f, "%d,%d,%s,%llu,%llu,%llu\n", step, rank, comm_op_name((CommOp)op), (unsigned long long)st.calls[op],
                (unsigned long long)st.sent[op], (unsigned long long)st.recv[op]);
    fclose(f);
}

// The run's header: the steps, the batch, the grid and the offload paths.
inline void print_run_header(const TrainOptions& o, const RunSetup& run, int total_steps, int start_step,
                             long tokens_per_step) {
    printf("training %d steps from step %d: %ld tokens per step (%d rank(s) x B=%d x T=%d x %d micro-step(s))\n",
           total_steps, start_step, tokens_per_step, run.dp, o.micro_batch, o.seq_len, run.micro_steps);
    if (run.tp > 1)
        printf("tensor parallel: %d x %d grid (tensor groups of %d ranks%s, ZeRO stage %d across %d data-parallel "
               "rank(s))\n", run.tp, run.dp, run.tp, run.sp ? ", sequence parallel" : "", o.zero_stage, run.dp);
    if (run.pp > 1) {
        printf("grid: %d ranks = %d data-parallel x %d tensor-parallel x %d pipeline stages; rank = (stage*%d + "
               "dp)*%d + tp (tensor rank fastest, then data rank, then stage)\n",
               run.world, run.dp, run.tp, run.pp, run.dp, run.tp);
        printf("pipeline: %s schedule, %d micro-batch(es) per step; layers per stage %s; stage 0 holds the "
               "embeddings, stage %d the final layernorm and the LM head (tied to stage 0's wte); ZeRO stage %d "
               "across each stage's %d data-parallel rank(s)\n",
               pipeline_schedule_name(run.schedule), run.micro_steps, run.pipeline.text().c_str(), run.pp - 1,
               o.zero_stage, run.dp);
    }
    for (const std::string& line : {offload_grad_accum_text(o, run), offload_delay_text(run)})
        if (!line.empty()) printf("%s\n", line.c_str());
    if (run.cudnn_attention) printf("attention: cuDNN's fused flash attention (--attention cudnn)\n");
    if (!variants_text().empty()) printf("variants on (ZERO_VARIANTS): %s\n", variants_text().c_str());
}

// MFU's denominator: the matmul peak of the devices in use (emulated ranks
// share one device; NCCL ranks have one each), the best probe this machine has
// recorded (zero/perf/peak_flops.h), so that load does not move it. Rank 0
// probes while the others wait; it prints what it used.
template <typename T>
double matmul_peak_for_mfu(const KernelCtx& ctx, const RunSetup& run, size_t params, int seq_len, Comm& world) {
    double peak = 0.0;
    world.barrier();  // nobody computes while rank 0 measures
    if (world.rank == 0) {
#ifdef ZERO_CUDA
        const int n = 8192;
        std::string key = device_name() + " " + dtype_name(run.dtype);
#else
        const int n = 1024;
        std::string key = device_name() + " " + dtype_name(run.dtype) + " " + std::to_string(process_cpu_threads()) +
                          " thread(s)";
        printf("CPU threads: %d per rank, %d rank(s) in this process\n", run.cpu_threads_per_rank(),
               run.ranks_per_process);
#endif
#if defined(_OPENMP) && !defined(ZERO_CUDA)
        omp_set_num_threads(process_cpu_threads());  // every core of the process: the other ranks wait
#endif
        // (short where a record exists: it can only raise it)
        auto probe = [&](bool recorded) { return measure_matmul_peak_flops<T>(ctx, n, recorded ? 2 : 12); };
        PeakRecord rec = update_peak_record(key, probe, peak_record_path());
#if defined(_OPENMP) && !defined(ZERO_CUDA)
        omp_set_num_threads(run.cpu_threads_per_rank());
#endif
        if (!rec.note.empty()) printf("%s\n", rec.note.c_str());
        peak = rec.flops * (run.launch.world > 1 ? run.world : 1);
        printf("measured matmul peak: %s/s (%s); model: %s per token\n", flops_text(rec.flops).c_str(),
               dtype_name(run.dtype), flops_text(train_flops_per_token(params, run.cfg, seq_len)).c_str());
        if (rec.path.empty()) printf("  (this run's probe: no record kept, set ZERO_PEAK_FILE to keep one)\n");
        else printf("  (the best probe recorded for %s in %s; this run's: %s/s)\n", key.c_str(), rec.path.c_str(),
                    flops_text(rec.probe).c_str());
    }
    world.barrier();
    return peak;
}

// A step's line (rank 0): loss, norm, learning rate, time, throughput, MFU, memory.
inline void print_step_line(int step, int total_steps, double loss, const StepResult& res, float lr, double ms,
                            long tokens, bool fp16, float loss_scale, double mfu, const MemoryAccountant& mem) {
    printf("step %4d/%d | loss %.6f | norm %.4f | lr %.2e | %.2f ms | %.0f tok/s", step, total_steps, loss,
           res.grad_norm, lr, ms, tokens / (ms / 1000.0));
    if (fp16) printf(" | scale %.17g%s", loss_scale, res.skipped ? " (skipped)" : "");
    if (mfu > 0) printf(" | MFU %.1f%%", 100.0 * mfu);
    printf(" | mem %.1f MiB\n", mem.peak_live(Arena::Device) / 1048576.0);
}

// --mem_report 1: every rank's memory and traffic of the step (`step`, counted
// from 1), one rank at a time in rank order, and with an output directory its
// CSV rows (mem_report_rank<r>.csv, comm_report_rank<r>.csv).
inline void report_memory(int step, Groups& g, const PhaseMemory& phases, const MemoryPrediction& predicted,
                          const MemoryAccountant& mem, const OffloadTimes* offload, size_t optimizer_numel,
                          size_t device_used, size_t device_used_at_start, const std::string& out_dir) {
    const int rank = g.world.rank;
    for (int r = 0; r < g.world.world; r++) {
        g.world.barrier();
        if (r != rank) continue;
        CommStats pipeline = g.pipeline_stats();
        print_memory_line(rank, phases, predicted, mem, g.data().stats, device_used,
                          g.tensor ? &g.tensor->stats : nullptr, device_used_at_start, g.pipe ? &pipeline : nullptr);
        if (offload) print_offload_line(rank, *offload, optimizer_numel);
        if (out_dir.empty()) continue;
        std::string suffix = "_rank" + std::to_string(rank) + ".csv";
        append_memory_csv(out_dir + "/mem_report" + suffix, step, rank, phases, predicted, mem, device_used);
        append_comm_csv(out_dir + "/comm_report" + suffix, step, rank, g.data().stats);
    }
    g.world.barrier();
}

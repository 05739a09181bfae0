// The per-step reports: each rank's memory after forward, after backward and
// after the optimizer step (the homework's table) next to the predictor's
// numbers, and the bytes each collective moved. Printed as one line per rank
// and appended to CSV files in the output directory.
#pragma once

#include <string>

#include "zero/comm/comm.h"
#include "zero/base/common.h"
#include "zero/base/memory.h"
#include "zero/engine/memory_predictor.h"
#include "zero/engine/zero_engine.h"

struct PhaseMemory {
    MemCounts forward, backward, step;  // live bytes at the end of each phase
};

// a + b, op by op
inline CommStats combined(const CommStats& a, const CommStats& b) {
    CommStats c = a;
    for (int op = 0; op < NUM_COMM_OPS; op++)
        c.sent[op] += b.sent[op], c.recv[op] += b.recv[op], c.calls[op] += b.calls[op];
    return c;
}

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
                              const CommStats* tensor = nullptr, size_t device_used_at_start = 0,
                              const CommStats* pipeline = nullptr) {
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
        if (arena == Arena::Device)
            printf(" | comm sent %.2f MiB recv %.2f MiB", comm.bulk_sent() / MiB, comm.bulk_recv() / MiB);
        if (arena == Arena::Device && tensor)
            printf(" | tensor-parallel sent %.2f MiB recv %.2f MiB", tensor->bulk_sent() / MiB,
                   tensor->bulk_recv() / MiB);
        if (arena == Arena::Device && pipeline)
            printf(" | pipeline sent %.2f MiB recv %.2f MiB", pipeline->bulk_sent() / MiB, pipeline->bulk_recv() / MiB);
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

// The step's trace (zero/comm/comm.h): every collective and host transfer in
// the order this rank issued it.
inline void append_trace_csv(const std::string& path, int step, int rank, const Trace& trace) {
    bool fresh = !file_exists(path);
    FILE* f = open_file(path, "a");
    if (fresh) fprintf(f, "step,rank,index,op,group,bytes,unit\n");
    for (size_t i = 0; i < trace.size(); i++)
        fprintf(f, "%d,%d,%zu,%s,%s,%llu,%d\n", step, rank, i, trace[i].op.c_str(), trace[i].group.c_str(),
                (unsigned long long)trace[i].bytes, trace[i].unit);
    fclose(f);
}

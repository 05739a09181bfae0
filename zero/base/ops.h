// A dry run: the trainer's own step run without computing anything (why:
// zero/README.md, "The dry run"). While a thread has an OpRecorder
// (tl_recorder), every kernel launch, copy, collective, send, receive and piece
// of host work is recorded here instead of run -- its kind and shape, the lane
// it runs on, the events it waits for -- and the accountant hands out
// addresses that hold nothing. The step-time model (zero/perf/) times the
// list; the accountant's numbers are the rank's memory at any scale.
//
// The same recorder captures a real step for calibration (capture = true):
// every op still runs, and each kernel, copy and piece of host work keeps a
// closure that runs it again, for --calibrate to time it alone
// (zero/run/calibration.h).
//
// Lanes are a rank's compute stream, its comm stream, its own thread (host),
// its host-task worker, its delayed-update thread and its disk I/O threads
// (NVMe offload, zero/engine/disk_states.h). An op waits for the ops
// before it on its lane and for those in `after`: the events its stream
// waited on (stream_wait), or the one its host wait synchronised.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "zero/base/stream_check.h"

enum class Lane : int { Compute, Comm, Host, Worker, Update, Disk, COUNT };
constexpr int NUM_LANES = (int)Lane::COUNT;

struct StepOp {
    std::string kind;        // a kernel (matmul_fwd_16, ...), a copy (copy, zero, to_host, to_device), a
                             // collective (all_reduce, reduce_scatter, all_gather, scalar), send, recv, or host
                             // work (cpu_adamw_16, host_add_16, host_sumsq_16, host_wait: waiting only)
    Lane lane = Lane::Compute;
    std::string group;       // collectives, sends, receives: data, tensor, pipe, tied
    uint64_t bytes = 0;      // collectives, sends, receives, copies: the whole buffer's bytes
    std::vector<long> dims;  // its shape (the cost table's key); n elements or bytes for the simple ones
    int peer = -1;           // a send's or a receive's other rank in its group (a pipeline's: the stage)
    int step = 0;            // which of the recorded steps
    std::vector<int> after;  // earlier ops it waits for, beyond those before it on its lane
    std::vector<Access> acc; // what it reads and writes (checking mode holds the edges to them)

    bool collective() const {
        return kind == "all_reduce" || kind == "reduce_scatter" || kind == "all_gather" || kind == "scalar";
    }
    bool transfer() const { return kind == "to_host" || kind == "to_device"; }
    bool p2p() const { return kind == "send" || kind == "recv"; }
    // what the cost table knows it by: "matmul_fwd_f32 256x768x2304x1"
    std::string key() const { return op_key(kind, dims); }
    static std::string op_key(const std::string& kind, const std::vector<long>& dims) {
        std::string k = kind;
        for (size_t i = 0; i < dims.size(); i++) k += (i ? "x" : " ") + std::to_string(dims[i]);
        return k;
    }
};

// A kernel kind in a compute dtype: "_f32" for fp32, "_16" for bf16 and fp16.
template <typename T>
std::string typed_kind(const char* kind) {
    return std::string(kind) + (sizeof(T) == 4 ? "_f32" : "_16");
}

class OpRecorder {
  public:
    explicit OpRecorder(bool capture_ = false) : capture(capture_) {}
    const bool capture;         // a real step: ops run, and `runs` keeps how to run each again
    std::vector<StepOp> ops;
    std::vector<std::function<void()>> runs;  // capture: each op's closure (empty: not replayable)
    // capture: how to wait until a run of the op's closure has finished -- its stream synchronised, as
    // a closure only queues a GPU op (empty: host work, done when the closure returns)
    std::vector<std::function<void()>> finishes;
    int step = 0;               // the step being recorded
    Lane host_lane = Lane::Host;  // where host work runs now: the rank's thread, or a task's worker
    int task_after = -1;        // the op a host task's first op waits for (its event)

    int add(StepOp op, std::function<void()> run = nullptr, std::function<void()> finish = nullptr) {
        if (capture) runs.push_back(std::move(run)), finishes.push_back(std::move(finish));
        op.step = step;
        if (op.lane == Lane::Host || op.lane == Lane::Worker || op.lane == Lane::Update) {
            if (op.lane != Lane::Host && task_after >= 0) op.after.push_back(task_after), task_after = -1;
        } else {
            std::vector<int>& w = waits[(int)op.lane];
            op.after.insert(op.after.end(), w.begin(), w.end());
            w.clear();
        }
        ops.push_back(std::move(op));
        return last[(int)ops.back().lane] = (int)ops.size() - 1;
    }
    int last_on(Lane lane) const { return last[(int)lane]; }
    // a stream waits for op `on` before its next op
    void wait(Lane lane, int on) {
        if (on >= 0) waits[(int)lane].push_back(on);
    }
    // the thread host work runs on now waits for op `on` (an event or a stream synchronised, a task
    // waited for, a disk read)
    void host_wait(int on) {
        if (on < 0) return;
        StepOp op;
        op.kind = "host_wait", op.lane = host_lane, op.after = {on};
        add(op);
    }

    // Addresses that hold nothing: a bump pointer per arena, far from real memory.
    void* reserve(size_t bytes, bool device, const std::string& name) {
        uint64_t& next = device ? next_device : next_host;
        void* p = (void*)next;
        next += (bytes + 4095) / 4096 * 4096 + 4096;
        note(p, bytes, device, name);
        return p;
    }
    // where the accountant's buffers are (a capture: its real ones)
    void note(const void* p, size_t bytes, bool device, const std::string& name) {
        (device ? device_ranges : host_ranges)[(uint64_t)p] = bytes;
        names.push_back({p, bytes, name});
    }
    struct Named {
        const void* p;
        size_t bytes;
        std::string name;
    };
    std::vector<Named> names;  // every buffer noted, for the checker's messages
    // in the device arena (else the host: its own, or memory the accountant did not give)
    bool on_device(const void* p) const { return inside(device_ranges, p); }
    // the accountant's (a closure of a capture may touch only what outlives the step)
    bool known(const void* p) const { return inside(device_ranges, p) || inside(host_ranges, p); }

  private:
    static bool inside(const std::map<uint64_t, size_t>& ranges, const void* p) {
        auto it = ranges.upper_bound((uint64_t)p);
        if (it == ranges.begin()) return false;
        --it;
        return (uint64_t)p < it->first + it->second;
    }
    int last[NUM_LANES] = {-1, -1, -1, -1, -1, -1};
    std::vector<int> waits[NUM_LANES];
    uint64_t next_device = 0x400000000000ull, next_host = 0x100000000000ull;  // 64 TiB, 16 TiB
    std::map<uint64_t, size_t> device_ranges, host_ranges;
};

// Checking mode's look at a dry run's list (zero/base/stream_check.h): the
// operations replayed through a checker that knows only the list's own
// order -- each lane in turn, an op after the ops it waits for, a stream's or
// a worker's op after the thread's past when it was issued: the order the
// step-time model lays them out in (zero/perf/simulate.h). Every op that
// touches bytes another op wrote must come after it, so a wait the recorder
// missed (a collective that could start before the gradients it sends are
// made, an upload before the host work it carries) fails here.
inline void check_op_order(const OpRecorder& rec, int rank) {
    static const char* lane_names[NUM_LANES] = {"the compute lane", "the comm lane", "the rank's thread",
                                                "the host-task worker", "the delayed update's thread",
                                                "the disk's I/O threads"};
    StreamChecker c(rank);
    int agent[NUM_LANES];
    for (int l = 0; l < NUM_LANES; l++) agent[l] = l == (int)Lane::Host ? c.thread : c.add_agent(lane_names[l]);
    for (const OpRecorder::Named& n : rec.names) c.track(n.p, n.bytes, n.name);
    std::vector<StreamChecker::Clock> done(rec.ops.size());
    for (size_t i = 0; i < rec.ops.size(); i++) {
        const StepOp& op = rec.ops[i];
        const int a = agent[(int)op.lane];
        if (op.lane != Lane::Host) c.join(a, c.clock_of(c.thread));
        for (int j : op.after) c.join(a, done[j]);
        c.tick(a);
        c.check(a, (op.kind + " (op " + std::to_string(i) + " of a dry run's list)").c_str(), op.acc);
        done[i] = c.clock_of(a);
    }
}

// The calling thread's recorder: non-null during a dry run (or a capture).
inline thread_local OpRecorder* tl_recorder = nullptr;
// The recorder of a dry run, where nothing runs; null in a real run, captured or not.
inline OpRecorder* dry_recorder() {
    OpRecorder* r = tl_recorder;
    return r && !r->capture ? r : nullptr;
}

// The lane a stream's name gives it (stream_create's name).
inline Lane lane_named(const char* name) {
    return name && strcmp(name, "the comm stream") == 0 ? Lane::Comm : Lane::Compute;
}

// Work that is not the step's own (the emulated backend's copies inside a
// collective, a --calibrate's timing): not recorded while this lives.
struct NotRecorded {
    OpRecorder* saved = tl_recorder;
    NotRecorded() { tl_recorder = nullptr; }
    ~NotRecorded() { tl_recorder = saved; }
    NotRecorded(const NotRecorded&) = delete;
    NotRecorded& operator=(const NotRecorded&) = delete;
};

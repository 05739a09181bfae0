// The step as a list of operations (why: zero/README.md, "The dry run"). While
// a thread has an OpRecorder (tl_recorder), every kernel launch, copy,
// collective, send, receive, piece of host work, host wait and disk transfer
// is recorded here, its kind, shape, lane and the events it waits for, either
// with nothing run (Recording::Dry: the accountant's addresses hold nothing)
// or as it runs (Recording::Capture: each kernel, copy and piece of host work
// keeps a closure that --calibrate runs again alone, zero/run/calibration.h).
// Both go through the same calls (test perf_trace holds them to each other).
//
// Lanes are a rank's compute stream, its comm stream, its own thread (host),
// its host-task worker, its delayed-update thread and its disk I/O threads
// (NVMe offload, zero/engine/disk_states.h). An op waits for the ops
// before it on its lane and for those in `after`: the events its stream
// waited on (stream_wait), or the one its host wait synchronised.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "zero/base/stream_check.h"

// Where an op runs. The names are what a trace shows (zero/perf/trace.h).
enum class Lane : int { Compute, Comm, Host, Worker, Update, Disk, COUNT };
constexpr int NUM_LANES = (int)Lane::COUNT;
inline const char* lane_name(Lane lane) {
    static const char* names[NUM_LANES] = {"compute stream", "comm stream", "rank's thread", "host-task worker",
                                           "delayed update", "disk"};
    return names[(int)lane];
}

// What an op is. The step-time model and the trace branch on it; a kernel's
// and host work's cost is looked up by the op's name.
enum class OpKind : int {
    Kernel, HostWork,                                          // named by what they compute
    Zero, Copy, ToHost, ToDevice,                              // a memset; copies by where they go
    AllReduce, ReduceScatter, AllGather, Broadcast, Scalar,    // collectives (Scalar: a host reduction)
    Send, Recv,                                                // between pipeline stages
    HostWait,                                                  // the thread waits, nothing else
    DiskRead, DiskWrite,                                       // NVMe offload's tiles
    COUNT
};
inline const char* op_kind_name(OpKind k) {
    static const char* names[(int)OpKind::COUNT] = {
        "kernel", "host_work", "zero", "copy", "to_host", "to_device", "all_reduce", "reduce_scatter",
        "all_gather", "broadcast", "scalar", "send", "recv", "host_wait", "disk_read", "disk_write"};
    return names[(int)k];
}

struct StepOp {
    OpKind kind = OpKind::Kernel;
    std::string name;        // kernels and host work: their typed name (matmul_fwd_16, cpu_adamw_f32,
                             // host_add_16); the rest: op_kind_name(kind)
    Lane lane = Lane::Compute;
    std::string group;       // collectives, sends, receives: data, tensor, pipe, tied
    uint64_t bytes = 0;      // collectives, sends, receives, copies: the whole buffer's bytes
    std::vector<long> dims;  // its shape (the cost table's key); n elements or bytes for the simple ones
    int peer = -1;           // a send's or a receive's other rank in its group (a pipeline's: the stage)
    int unit = -1;           // the unit it serves (-1: none), as the engine and the model said (at_unit)
    int step = 0;            // which of the recorded steps
    std::vector<int> after;  // earlier ops it waits for, beyond those before it on its lane
    std::vector<Access> acc; // what it reads and writes (checking mode holds the edges to them)

    // the data group's and the tensor group's reductions and gathers (a broadcast is no step's)
    bool collective() const {
        return kind == OpKind::AllReduce || kind == OpKind::ReduceScatter || kind == OpKind::AllGather ||
               kind == OpKind::Scalar;
    }
    bool transfer() const { return kind == OpKind::ToHost || kind == OpKind::ToDevice; }
    bool p2p() const { return kind == OpKind::Send || kind == OpKind::Recv; }
    bool disk() const { return kind == OpKind::DiskRead || kind == OpKind::DiskWrite; }
    // what the cost table knows it by: "matmul_fwd_f32 256x768x2304x1"
    std::string key() const { return op_key(name, dims); }
    static std::string op_key(const std::string& name, const std::vector<long>& dims) {
        std::string k = name;
        for (size_t i = 0; i < dims.size(); i++) k += (i ? "x" : " ") + std::to_string(dims[i]);
        return k;
    }
};

// The ops from `first` on, with the edges into earlier ops dropped (those are done) and the
// rest renumbered from 0: a steady-state step cut out of a recording that began earlier.
inline std::vector<StepOp> ops_from(const std::vector<StepOp>& ops, size_t first) {
    std::vector<StepOp> out;
    for (size_t i = first; i < ops.size(); i++) {
        StepOp op = ops[i];
        op.after.clear();
        for (int a : ops[i].after)
            if (a >= (int)first) op.after.push_back(a - (int)first);
        out.push_back(std::move(op));
    }
    return out;
}

// An op of kind k on lane l, named by its kind (kernels and host work: by `name`).
inline StepOp step_op(OpKind k, Lane l, std::string name = "") {
    return {.kind = k, .name = name.empty() ? op_kind_name(k) : std::move(name), .lane = l};
}

// A kernel kind in a compute dtype: "_f32" for fp32, "_16" for bf16 and fp16.
template <typename T>
std::string typed_kind(const char* kind) {
    return std::string(kind) + (sizeof(T) == 4 ? "_f32" : "_16");
}

// How a recorder's ops come about: a dry run records them and runs nothing; a
// capture runs each as it records it, and keeps how to run it again.
enum class Recording { Dry, Capture };

// A capture's clock, where one is kept (a traced step, zero/perf/trace.h):
// when each op began and ended. `stream` is the op's stream (null: the
// thread's own work); the backend stamps a stream's op on the stream itself
// (zero/base/backend.h, OpClock).
struct OpStamps {
    virtual ~OpStamps() = default;
    virtual void begin(int op, const void* stream) = 0;
    virtual void end(int op, const void* stream) = 0;
    // stamped by another thread (the disk's: `place` its ring buffer) or after the fact (an emulated pipeline's
    // sends and receives)
    virtual void span(int op, double start_s, double end_s, int place = -1) = 0;
};

class OpRecorder {
  public:
    explicit OpRecorder(Recording how) : capture(how == Recording::Capture) { last.fill(-1); }
    const bool capture;         // Recording::Capture: ops run, and `runs` keeps how to run each again
    std::vector<StepOp> ops;
    std::vector<std::function<void()>> runs;  // capture: each op's closure (empty: not replayable)
    // capture: how to wait until a run of the op's closure has finished -- its stream synchronised, as
    // a closure only queues a GPU op (empty: host work, done when the closure returns)
    std::vector<std::function<void()>> finishes;
    int step = 0;               // the step being recorded
    Lane host_lane = Lane::Host;  // where host work runs now: the rank's thread, or a task's worker
    int task_after = -1;        // the op a host task's first op waits for (its event)
    int unit = -1;              // the unit the ops recorded now serve (at_unit)
    OpStamps* stamps = nullptr;  // a capture's clock, if it keeps one

    // Runs op i's work `fn`, stamped if the capture keeps a clock.
    template <typename Fn>
    void timed(int i, const void* stream, Fn&& fn) {
        if (stamps) stamps->begin(i, stream);
        fn();
        if (stamps) stamps->end(i, stream);
    }

    // Records op (in a capture, beside how to run it again and wait for it); returns its index.
    int add(StepOp op, std::function<void()> run = nullptr, std::function<void()> finish = nullptr) {
        if (capture) runs.push_back(std::move(run)), finishes.push_back(std::move(finish));
        op.step = step, op.unit = unit;
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
    // waited for, a disk read): `wait` does it (a dry run's does nothing)
    template <typename Wait>
    void host_wait(int on, Wait&& wait) {
        if (on < 0) return wait();
        StepOp op = step_op(OpKind::HostWait, host_lane);
        op.after = {on};
        timed(add(op), nullptr, wait);
    }
    void host_wait(int on) {
        host_wait(on, [] {});
    }
    // Events: the op an event's last record follows (-1: none recorded here, or before the recorder).
    void event_recorded(const void* e, Lane lane) { event_ops[e] = last_on(lane); }
    int event_op(const void* e) const {
        auto it = event_ops.find(e);
        return it == event_ops.end() ? -1 : it->second;
    }
    void forget_event(const void* e) { event_ops.erase(e); }  // (its address may come back as another's)

    std::vector<StepOp> ops_from(size_t first) const { return ::ops_from(ops, first); }

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
    std::array<int, NUM_LANES> last;  // each lane's last op (-1: none yet)
    std::array<std::vector<int>, NUM_LANES> waits;
    std::map<const void*, int> event_ops;
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
    StreamChecker c(rank);
    int agent[NUM_LANES];
    for (int l = 0; l < NUM_LANES; l++)
        agent[l] = l == (int)Lane::Host ? c.thread : c.add_agent(std::string("the ") + lane_name((Lane)l));
    for (const OpRecorder::Named& n : rec.names) c.track(n.p, n.bytes, n.name);
    std::vector<StreamChecker::Clock> done(rec.ops.size());
    for (size_t i = 0; i < rec.ops.size(); i++) {
        const StepOp& op = rec.ops[i];
        const int a = agent[(int)op.lane];
        if (op.lane != Lane::Host) c.join(a, c.clock_of(c.thread));
        for (int j : op.after) c.join(a, done[j]);
        c.tick(a);
        c.check(a, (op.name + " (op " + std::to_string(i) + " of a dry run's list)").c_str(), op.acc);
        done[i] = c.clock_of(a);
    }
}

// A dry run's stand-in for a stream or event handle: unique in the process, never dereferenced.
inline void* stand_in_handle() {
    static std::atomic<uint64_t> next{0x10000};
    return (void*)(next += 16);
}

// The calling thread's recorder: non-null during a dry run (or a capture).
inline thread_local OpRecorder* tl_recorder = nullptr;
// The recorder of a dry run, where nothing runs; null in a real run, captured or not.
inline OpRecorder* dry_recorder() {
    OpRecorder* r = tl_recorder;
    return r && !r->capture ? r : nullptr;
}

// The unit the ops recorded from here on serve (the engine's hooks and the
// model say it; a trace shows it): the labels of a recording, nothing else.
inline void at_unit(int u) {
    if (OpRecorder* r = tl_recorder) r->unit = u;
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

// An op of the step, on `stream` (null: the thread's own work): recorded on the
// calling thread's recorder, if any, and run unless that is a dry run. `run`
// does it; `finish` waits until it is done
// (its stream synchronised; empty for host work, done when `run` returns); a
// capture keeps both, to run the op again, when it is `replayable`.
template <typename Run>
void perform(StepOp op, const void* stream, Run&& run, std::function<void()> finish = nullptr, bool replayable = true) {
    OpRecorder* r = tl_recorder;
    if (!r) return (void)run();
    if (!r->capture) return (void)r->add(std::move(op));
    const int i = replayable ? r->add(std::move(op), run, std::move(finish)) : r->add(std::move(op));
    r->timed(i, stream, run);
}

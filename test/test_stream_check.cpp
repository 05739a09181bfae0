// Checking mode (zero/base/stream_check.h) on small cases whose GPU order is
// known: every missing event between two agents that touch the same bytes is
// refused, naming both, and every ordered pair (an event, a stream
// synchronisation, a host task's event and its wait, a chain of events through
// a third stream) passes; reads do not conflict with reads; released memory
// reads as NaN. The engine's own orders are held by every other test, which
// runs in checking mode too (test/CMakeLists.txt).
#include <cmath>
#include <cstdlib>

#include "test/child_process.h"
#include "test/test_util.h"
#include "zero/base/backend.h"
#include "zero/base/dtype.h"
#include "zero/base/memory.h"
#include "zero/engine/host_tasks.h"
#include "kernels/kernels.h"

// A rank's worth of checking: an accountant (which makes the checker), two
// streams, device buffers and a host buffer.
struct Rank {
    MemoryAccountant mem{0};
    Stream a = stream_create(Lane::Compute, "stream A"), b = stream_create(Lane::Compute, "stream B"), c = stream_create(Lane::Compute, "stream C");
    float* x = mem.allocate_array<float>(64, MemKind::Scratch, Arena::Device, "x", false);
    float* y = mem.allocate_array<float>(64, MemKind::Scratch, Arena::Device, "y", false);
    float* h = mem.allocate_array<float>(64, MemKind::Comm, Arena::Host, "h", false);
    ~Rank() {
        for (Stream s : {a, b, c}) stream_destroy(s);
    }
    // a kernel on stream s writing (or reading) n floats at p
    void write(Stream s, float* p, size_t n = 64) { check_on(s, "a write", {writes(p, n)}); }
    void read(Stream s, const float* p, size_t n = 64) { check_on(s, "a read", {reads(p, n)}); }
};

// fn must end the process with a checking-mode message containing `part`.
static void expect_race(const char* what, const std::function<void(Rank&)>& fn, const std::string& part) {
    expect_failure(what, [&] {
        Rank r;
        fn(r);
    }, part);
}
// fn must pass (run in a child too: a wrong refusal ends the process).
static void expect_ordered(const char* what, const std::function<void(Rank&)>& fn) {
    ChildResult res = run_in_child([&] {
        Rank r;
        fn(r);
    });
    EXPECT(res.status == 0, "%s: refused: %s", what, res.err.c_str());
}

int main() {
    setenv("ZERO_CHECK", "1", 1);
    EXPECT(checking_mode(), "ZERO_CHECK=1 turns checking mode on");

    // two streams
    expect_race("write on A, read on B", [](Rank& r) { r.write(r.a, r.x), r.read(r.b, r.x); },
                "a read on stream B reads x bytes [0, 256), which a write on stream A wrote");
    expect_race("read on A, write on B", [](Rank& r) { r.read(r.a, r.x), r.write(r.b, r.x); },
                "a write on stream B writes x bytes [0, 256), which a read on stream A read");
    expect_race("write on A, write on B", [](Rank& r) { r.write(r.a, r.x), r.write(r.b, r.x); }, "no event orders");
    expect_ordered("write on A, event, read on B", [](Rank& r) {
        Event e = event_create();
        r.write(r.a, r.x);
        event_record(e, r.a);
        stream_wait(r.b, e);
        r.read(r.b, r.x);
        event_destroy(e);
    });
    expect_race("the event recorded before the write", [](Rank& r) {
        Event e = event_create();
        event_record(e, r.a);
        r.write(r.a, r.x);
        stream_wait(r.b, e);
        r.read(r.b, r.x);
    }, "which a write on stream A wrote");
    expect_ordered("a chain of events through a third stream", [](Rank& r) {
        Event e1 = event_create(), e2 = event_create();
        r.write(r.a, r.x);
        event_record(e1, r.a);
        stream_wait(r.b, e1);
        event_record(e2, r.b);
        stream_wait(r.c, e2);
        r.write(r.c, r.x);
        event_destroy(e1), event_destroy(e2);
    });
    expect_ordered("reads on two streams", [](Rank& r) { r.read(r.a, r.x), r.read(r.b, r.x), r.read(r.a, r.x); });
    expect_ordered("disjoint ranges", [](Rank& r) { r.write(r.a, r.x, 32), r.write(r.b, r.x + 32, 32); });
    expect_race("overlapping ranges", [](Rank& r) { r.write(r.a, r.x, 33), r.read(r.b, r.x + 32, 8); },
                "x bytes [128, 160), which a write on stream A wrote");
    expect_ordered("another buffer", [](Rank& r) { r.write(r.a, r.x), r.read(r.b, r.y); });
    expect_ordered("one stream, program order", [](Rank& r) { r.write(r.a, r.x), r.read(r.a, r.x), r.write(r.a, r.x); });
    // a write that is ordered after everything before it stands for all of it
    expect_race("after an ordered write, an unordered read", [](Rank& r) {
        Event e = event_create();
        r.read(r.b, r.x);
        event_record(e, r.b);
        stream_wait(r.a, e);
        r.write(r.a, r.x);
        r.read(r.c, r.x);
    }, "a read on stream C reads x");

    // the host and a stream: an upload from host memory, then the host writes it again
    expect_race("host rewrites a buffer an upload may still read", [](Rank& r) {
        device_copy(r.x, r.h, 64 * sizeof(float), r.a);
        check_host("the host", {writes(r.h, 64)});
    }, "the host on the rank's thread writes h bytes [0, 256), which a copy on stream A read");
    expect_ordered("host waits for the upload's event", [](Rank& r) {
        Event e = event_create();
        device_copy(r.x, r.h, 64 * sizeof(float), r.a);
        event_record(e, r.a);
        event_sync(e);
        check_host("the host", {writes(r.h, 64)});
        event_destroy(e);
    });
    expect_ordered("host synchronises the stream", [](Rank& r) {
        device_copy(r.x, r.h, 64 * sizeof(float), r.a);
        stream_sync(r.a);
        check_host("the host", {writes(r.h, 64)});
    });
    expect_ordered("a stream reads what the host wrote before issuing", [](Rank& r) {
        check_host("the host", {writes(r.h, 64)});
        device_copy(r.x, r.h, 64 * sizeof(float), r.a);
    });
    expect_race("the host reads a download it did not wait for", [](Rank& r) {
        device_copy(r.h, r.x, 64 * sizeof(float), r.a);
        check_host("the host", {reads(r.h, 64)});
    }, "which a copy on stream A wrote");

    // host tasks: they start after their event, and only wait() orders the host after them
    expect_ordered("a host task after its event", [](Rank& r) {
        HostTasks tasks;
        Event e = event_create();
        device_copy(r.h, r.x, 64 * sizeof(float), r.a);
        event_record(e, r.a);
        uint64_t id = tasks.submit(e, [&] { check_host("a host add", {reads(r.h, 64)}); });
        tasks.wait(id);
        check_host("the host", {writes(r.h, 64)});
        event_destroy(e);
    });
    expect_race("a host task whose event comes before the copy", [](Rank& r) {
        HostTasks tasks;
        Event e = event_create();
        event_record(e, r.a);
        device_copy(r.h, r.x, 64 * sizeof(float), r.a);
        tasks.submit(e, [&] { check_host("a host add", {reads(r.h, 64)}); });
    }, "a host add on the host-task worker reads h bytes [0, 256), which a copy on stream A wrote");
    expect_race("the host rewrites what a task it did not wait for reads", [](Rank& r) {
        HostTasks tasks;
        tasks.submit(nullptr, [&] { check_host("a host add", {reads(r.h, 64)}); });
        check_host("the host", {writes(r.h, 64)});
    }, "which a host add on the host-task worker read");
    expect_race("a late task (the delayed update) and the host", [](Rank& r) {
        HostTasks late(true);
        late.submit(nullptr, [&] { check_host("an AdamW", {writes(r.h, 64)}); });
        late.drain();
        HostTasks other;
        other.submit(nullptr, [&] { check_host("a host add", {reads(r.h, 64)}); });
        check_host("the host", {writes(r.h, 64)});
    }, "which a host add on the host-task worker read");

    // a capture (--calibrate, zero/run/calibration.h) keeps beside each op how to wait for it: its own
    // stream synchronised, so a replayed download or kernel on stream B is waited for on B (a GPU op
    // timed by synchronising another stream would be timed as its launch alone)
    auto capture_on_b = [](Rank& r, OpRecorder& rec) {
        rec.note(r.x, 64 * sizeof(float), true, "x"), rec.note(r.y, 64 * sizeof(float), true, "y");
        rec.note(r.h, 64 * sizeof(float), false, "h");
        tl_recorder = &rec;
        device_copy(r.h, r.x, 64 * sizeof(float), r.b);
        KernelCtx ctx;
        ctx.stream = r.b;
        launch(ctx, "a kernel", 0, {64}, {writes(r.y, 64)}, [] {});
        host_work("host work", 64, {}, [] {});
        tl_recorder = nullptr;
        CHECK(rec.runs.size() == 3 && rec.finishes.size() == 3 && rec.runs[0] && rec.runs[1] && rec.runs[2],
              "three ops captured, each with its closure");
        CHECK(rec.finishes[0] && rec.finishes[1] && !rec.finishes[2],
              "the copy and the kernel have a finish, host work does not");
    };
    for (int op : {0, 1})  // (each alone: either one's finish synchronises stream B for both)
        expect_ordered(op ? "a captured kernel, finished on its stream" : "a captured copy, finished on its stream",
                       [&](Rank& r) {
                           OpRecorder rec(Recording::Capture);
                           capture_on_b(r, rec);
                           rec.runs[op](), rec.finishes[op]();
                           check_host("the host", {reads(op ? r.y : r.h, 64)});
                       });
    expect_race("a captured kernel waited for on another stream", [&](Rank& r) {
        OpRecorder rec(Recording::Capture);
        capture_on_b(r, rec);
        rec.runs[1](), stream_sync(r.a);
        check_host("the host", {reads(r.y, 64)});
    }, "which a kernel on stream B wrote");

    // released memory is poisoned
    {
        MemoryAccountant mem(0);
        float* p = mem.allocate_array<float>(16, MemKind::Grads, Arena::Device, "g", false);
        mem.set_live(p, true);
        for (int i = 0; i < 16; i++) p[i] = 1.0f;
        mem.set_live(p, false);
        bool all_nan = true;
        for (int i = 0; i < 16; i++) all_nan = all_nan && std::isnan(p[i]);
        EXPECT(all_nan, "a released buffer reads as NaN in checking mode");
        uint16_t half[2];
        memset(half, 0xFF, sizeof(half));
        EXPECT(std::isnan(to_float(*(bf16*)&half[0])) && std::isnan(to_float(*(f16*)&half[1])),
               "the poison is a NaN in bf16 and fp16 too");
    }
    return test_summary("stream_check");
}

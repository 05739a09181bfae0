// The step-time model's arithmetic (zero/perf/), against closed forms worked
// out by hand:
//   collectives: ring and tree all-reduce, ring reduce-scatter/all-gather, the
//     choice between them, the two-level (hierarchical) form, where a grid's
//     groups sit on the nodes;
//   the layout in time: a synchronous build sums its ops, a comm stream
//     overlaps the compute stream as far as the waits let it, host work holds
//     the issue of what follows; a pipeline's stages against the schedule's
//     own timeline, and ranks sharing too few cores;
//   costs: a measured profile's exact shapes, the interpolation between two
//     shapes, oversubscribed ranks, a specification profile's efficiencies
//     along its chain;
//   the step's FLOPs: the schedule's matmuls and attention equal
//     6 (12 L C^2 + Vp C) + 6 L C T per token, plus the recomputed forward;
//   the predictor without Pa keeps every layer's whole input;
//   the delayed parameter update: with only kernels and the CPU AdamW taking
//     time, an offloaded step is their sum, and max(kernels, AdamW) with
//     --offload_delay_steps (the AdamW overlaps the next step's kernels);
//   the V100 cluster's model of 2019's software and hardware: Megatron-LM's
//     FLOP count against NVIDIA's own published V100 table, data-group
//     collectives serialized when the software does not overlap them,
//     DeepSpeed 0.2's reduce-scatter as one reduce per rank, a device's
//     matmul efficiency from a GEMM benchmark, and the anchor: the anchor run
//     predicted takes exactly its published time.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "test/test_util.h"
#include "zero/pipeline/schedule.h"
#include "zero/run/predict_report.h"

static bool near(double a, double b, double rel = 1e-9) { return std::fabs(a - b) <= rel * std::fabs(b) + 1e-15; }

// The trainer's flags' dry run (rank 0's two steady steps), as --predict takes it.
static StepSchedule schedule_of(const std::string& flags) {
    TrainOptions o = options_from_flags(flags);
    RunSetup run = make_run_setup(o);
    return step_schedules(dry_run(o, run), run)[0];
}

static void collectives() {
    Tier t{1e11, 1e-5};  // 100 GB/s, 10 us a step
    // S = 1 GB, p = 8: ring all-reduce 2(p-1) a + 2(p-1)/p S/B = 14e-5 + 1.75 * 0.01
    EXPECT(near(ring_seconds("all_reduce", 1e9, 8, t), 14e-5 + 0.0175), "ring all-reduce %.9g",
           ring_seconds("all_reduce", 1e9, 8, t));
    EXPECT(near(ring_seconds("reduce_scatter", 1e9, 8, t), 7e-5 + 0.00875), "ring reduce-scatter");
    EXPECT(near(ring_seconds("all_gather", 1e9, 8, t), 7e-5 + 0.00875), "ring all-gather");
    EXPECT(ring_seconds("all_reduce", 1e9, 1, t) == 0, "one rank moves nothing");
    // tree: 2 ceil(log2 p) a + 2 S/B; p = 8: 6e-5 + 0.02 (ring is faster for 1 GB), for 8 bytes 6e-5 (tree wins)
    EXPECT(near(tree_all_reduce_seconds(1e9, 8, t), 6e-5 + 0.02), "tree all-reduce");
    EXPECT(near(flat_seconds("all_reduce", 1e9, 8, t), 14e-5 + 0.0175), "1 GB: the ring");
    EXPECT(near(flat_seconds("all_reduce", 8, 8, t), 6e-5 + 16 / 1e11), "8 bytes: the tree");
    EXPECT(near(tree_all_reduce_seconds(8, 5, t), 6e-5 + 16 / 1e11), "p = 5: ceil(log2 5) = 3 levels");
    // two levels, m = 4 per node on n = 2 nodes: RS(S, 4) + AR(S/4, 2) + AG(S, 4) on the two tiers
    Tier in{2e11, 2e-6}, out{1e10, 1e-5};
    double rs = 3 * 2e-6 + 0.75 * 1e9 / 2e11, ar = flat_seconds("all_reduce", 2.5e8, 2, out);
    EXPECT(near(ar, 2e-5 + 2.5e8 / 1e10), "two nodes, ring = 2(n-1) a + 2(n-1)/n S/B");
    EXPECT(near(cluster_collective_seconds("all_reduce", 1e9, 4, 2, in, out), 2 * rs + ar), "hierarchical all-reduce");
    EXPECT(near(cluster_collective_seconds("reduce_scatter", 1e9, 4, 2, in, out),
                rs + ring_seconds("reduce_scatter", 2.5e8, 2, out)), "hierarchical reduce-scatter");
    EXPECT(near(cluster_collective_seconds("all_gather", 1e9, 1, 8, in, out), ring_seconds("all_gather", 1e9, 8, out)),
           "one per node: a ring over the nodes");
    EXPECT(near(cluster_collective_seconds("all_gather", 1e9, 8, 1, in, out), ring_seconds("all_gather", 1e9, 8, in)),
           "one node: the link");
    // where groups sit: rank = dp * t + tp, 16 devices per node
    int m, n;
    group_span(true, 16, 25, 16, m, n);
    EXPECT(m == 16 && n == 1, "t 16: a tensor group fills one node (%d x %d)", m, n);
    group_span(false, 16, 25, 16, m, n);
    EXPECT(m == 1 && n == 25, "t 16: each data rank on its own node (%d x %d)", m, n);
    group_span(true, 64, 6, 16, m, n);
    EXPECT(m == 16 && n == 4, "t 64 spans 4 nodes (%d x %d)", m, n);
    group_span(false, 4, 100, 16, m, n);
    EXPECT(m == 4 && n == 25, "t 4: 4 data ranks share a node, 25 nodes (%d x %d)", m, n);
    group_span(false, 1, 128, 16, m, n);
    EXPECT(m == 16 && n == 8, "no tp: 16 data ranks a node (%d x %d)", m, n);
}

// An op by its name: of the kind so named (all_reduce, host_wait, ...), else a kernel.
static StepOp named(const std::string& name) {
    for (int k = 0; k < (int)OpKind::COUNT; k++)
        if (name == op_kind_name((OpKind)k)) return step_op((OpKind)k, Lane::Compute);
    return step_op(OpKind::Kernel, Lane::Compute, name);
}

// A schedule of hand-made ops.
static StepOp op(const char* kind, Lane lane, std::vector<int> after = {}, int step = 0) {
    StepOp o = named(kind);
    o.lane = lane, o.after = after, o.step = step;
    return o;
}

// Each list's step ends (the thread's time), laid out by the one engine under `rules`.
static std::vector<std::vector<double>> ends(const std::vector<StepSchedule>& stages,
                                             const std::vector<std::vector<double>>& d, LayoutRules rules = {}) {
    std::vector<const std::vector<StepOp>*> lists;
    for (const StepSchedule& s : stages) lists.push_back(&s.ops);
    const Timeline tl = lay_out(lists, d, rules);
    EXPECT(tl.ran, "the lists cannot run together");
    return tl.step_end;
}
static LayoutRules synchronous() {
    LayoutRules r;
    r.synchronous = true;
    return r;
}
// the CPU build's emulated ranks sharing `capacity` ranks' worth of cores
static LayoutRules shared_cores(double ranks_per_list, double capacity) {
    LayoutRules r = synchronous();
    r.ranks_per_list = ranks_per_list, r.capacity = capacity;
    return r;
}

static void layout_in_time() {
    StepSchedule s;
    // step 0: a kernel (1), a collective on the comm stream after it (3), a kernel (2), a kernel waiting for the
    // collective (1); step 1 the same
    for (int k = 0; k < 2; k++) {
        int base = (int)s.ops.size();
        s.ops.push_back(op("a", Lane::Compute, {}, k));
        s.ops.push_back(op("all_reduce", Lane::Comm, {base}, k));
        s.ops.push_back(op("b", Lane::Compute, {}, k));
        s.ops.push_back(op("c", Lane::Compute, {base + 1}, k));
        s.ops.push_back(op("host_wait", Lane::Host, {base + 3}, k));
    }
    std::vector<std::vector<double>> d = {{1, 3, 2, 1, 0, 1, 3, 2, 1, 0}};
    std::vector<double> sync = ends({s}, d, synchronous())[0], streams = ends({s}, d)[0];
    EXPECT(near(sync[0], 7) && near(sync[1], 14), "synchronous: the sum (%g, %g)", sync[0], sync[1]);
    // streams: a 0-1, collective 1-4 beside b 1-3, c waits to 4, ends 5: the host waits for it
    EXPECT(near(streams[0], 5) && near(streams[1], 10), "streams: the collective hides b (%g, %g)", streams[0],
           streams[1]);
    // host work holds the issue of the next device op
    StepSchedule h;
    h.ops.push_back(op("cpu_adamw_f32", Lane::Host));
    h.ops.push_back(op("to_device", Lane::Comm));
    h.ops.push_back(op("k", Lane::Compute));
    h.ops.push_back(op("host_wait", Lane::Host, {1}));
    std::vector<double> he = ends({h}, {{2, 1, 5, 0}})[0];
    EXPECT(near(he[0], 3), "host 0-2, transfer 2-3, the kernel 2-7 unwaited: the host's step ends at 3 (%g)", he[0]);
}

// The reference for a pipeline's slots, written apart from the lay-out engine:
// slot by slot, each starting once its stage's slot before it and the slot it
// takes its input from (F(s-1, i) for F(s, i), B(s+1, i) for B(s, i)) have ended.
static double reference_makespan(const std::vector<StageSlots>& sched, const std::vector<std::vector<double>>& d) {
    const int P = (int)sched.size();
    int m = 0;
    for (const StageSlots& st : sched)
        for (const PipeSlot& x : st) m = std::max(m, x.micro + 1);
    std::vector<std::vector<std::vector<double>>> done(P, std::vector<std::vector<double>>(2, std::vector<double>(m, -1)));
    std::vector<size_t> next(P, 0);
    std::vector<double> clock(P, 0.0);
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < P; s++)
            while (next[s] < sched[s].size()) {
                const PipeSlot& x = sched[s][next[s]];
                const int from = x.backward ? s + 1 : s - 1;
                const double ready = from < 0 || from >= P ? 0.0 : done[from][x.backward][x.micro];
                if (ready < 0) break;
                clock[s] = done[s][x.backward][x.micro] = std::max(clock[s], ready) + d[s][next[s]];
                next[s]++, progress = true;
            }
    }
    return *std::max_element(clock.begin(), clock.end());
}

// A pipeline's stages laid out by the engine, against the reference above and
// against zero/pipeline/schedule.h's timeline of the same slots: each slot a
// receive (from the stage before for a forward, after for a backward), its
// work, and a send; F takes 1, B 2 on stage s, times 1 + s/4 (unequal stages).
static void pipelines() {
    for (PipelineSchedule kind : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
        for (int P : {2, 4}) {
            const int m = 6;
            std::vector<StageSlots> sched = pipeline_schedule(kind, P, m);
            std::vector<StepSchedule> stages(P);
            std::vector<std::vector<double>> dur(P), slot_time(P);
            for (int s = 0; s < P; s++)
                for (const PipeSlot& x : sched[s]) {
                    int from = x.backward ? s + 1 : s - 1, to = x.backward ? s - 1 : s + 1;
                    if (from >= 0 && from < P) {
                        StepOp r = op("recv", Lane::Host);
                        r.peer = from;
                        stages[s].ops.push_back(r), dur[s].push_back(0);
                    }
                    double work = (x.backward ? 2.0 : 1.0) * (1 + s / 4.0);
                    stages[s].ops.push_back(op("k", Lane::Compute)), dur[s].push_back(work);
                    slot_time[s].push_back(work);
                    if (to >= 0 && to < P) {
                        StepOp snd = op("send", Lane::Host);
                        snd.peer = to;
                        stages[s].ops.push_back(snd), dur[s].push_back(0);
                    }
                }
            const double want = reference_makespan(sched, slot_time);
            double timeline = 0;
            for (const auto& st : pipeline_timeline(sched, slot_time)) timeline = std::max(timeline, st.back().end);
            EXPECT(near(timeline, want), "%s P %d: the schedule's timeline %g, the reference %g",
                   pipeline_schedule_name(kind), P, timeline, want);
            double got = 0, shared = 0, squeezed = 0;
            for (const auto& e : ends(stages, dur, synchronous())) got = std::max(got, e[0]);
            for (const auto& e : ends(stages, dur, shared_cores(1, P))) shared = std::max(shared, e[0]);
            for (const auto& e : ends(stages, dur, shared_cores(1, 0.5))) squeezed = std::max(squeezed, e[0]);
            EXPECT(near(got, want) && near(shared, want), "%s P %d: laid out %g, shared cores %g, the reference %g",
                   pipeline_schedule_name(kind), P, got, shared, want);
            // half a core for all: one busy stage at a time runs at half speed, more share it
            double work = 0;
            for (const auto& st : slot_time)
                for (double w : st) work += w;
            EXPECT(squeezed >= 2 * want - 1e-9 && squeezed >= 2 * work - 1e-9, "%s P %d: half a core: %g (alone %g, work %g)",
                   pipeline_schedule_name(kind), P, squeezed, want, work);
        }
}

// A measured profile with hand-set times.
static Profile table_profile(bool synchronous) {
    Profile p;
    p.path = "<test>", p.measured = true, p.synchronous = synchronous, p.dtype = "fp32", p.cores = 2;
    p.peak_tflops = 0.1, p.hbm_gbs = 20;
    return p;
}

// The disk (NVMe offload) runs beside the rank's thread in both builds: a
// read issued before the forward (2) and backward (1) is waited for before the
// AdamW (1), and the tile's write goes on after the step's thread is done.
static void disk_beside_the_thread() {
    StepSchedule s;
    for (int k = 0; k < 2; k++) {
        int b = (int)s.ops.size();
        s.ops.push_back(op("disk_read", Lane::Disk, {}, k));
        s.ops.push_back(op("fwd", Lane::Compute, {}, k));
        s.ops.push_back(op("bwd", Lane::Compute, {}, k));
        s.ops.push_back(op("host_wait", Lane::Host, {b}, k));
        s.ops.push_back(op("cpu_adamw_f32", Lane::Host, {}, k));
        s.ops.push_back(op("disk_write", Lane::Disk, {b + 4}, k));
    }
    // a read of 5 ends after the thread's 3: it waits 2, then the AdamW; the write (2) overlaps the next step's
    // compute, and the next read (5) waits for the write: 6-8, read 8-13, the thread's 9-13 waits, AdamW 13-14
    std::vector<std::vector<double>> d = {{5, 2, 1, 0, 1, 2, 5, 2, 1, 0, 1, 2}};
    std::vector<double> streams = ends({s}, d)[0], sync = ends({s}, d, synchronous())[0],
                        shared = ends({s}, d, shared_cores(1, 1))[0];
    EXPECT(near(streams[0], 6) && near(streams[1], 14), "streams: the disk beside (%g, %g)", streams[0], streams[1]);
    EXPECT(near(sync[0], 6) && near(sync[1], 14), "CPU build: the disk beside its thread too (%g, %g)", sync[0], sync[1]);
    EXPECT(near(shared[0], 6) && near(shared[1], 14), "shared cores: the same (%g, %g)", shared[0], shared[1]);
    // two stages sharing one core: their work at half speed, their disks each its own lane: fwd and bwd 0-6,
    // AdamW 6-8 (the reads ended at 5), writes 8-10; then reads 10-15, compute 8-14, the wait, AdamW 15-17
    std::vector<double> two = ends({s, s}, {d[0], d[0]}, shared_cores(1, 1))[1];
    EXPECT(near(two[0], 8) && near(two[1], 17), "two stages on one core (%g, %g)", two[0], two[1]);
    // the disk is the machine's: an emulated run's ranks share it, a cluster node's devices share theirs
    MemoryQuery q;
    q.cfg = gpt2_config_from_descriptor("L=2,H=4,C=64,V=512,T=64");
    q.dtype_bytes = 4;
    Profile p = table_profile(true);
    p.disk_read_gbs = 2, p.disk_write_gbs = 1, p.devices_per_node = 8;
    StepOp rd = op("disk_read", Lane::Disk), wr = op("disk_write", Lane::Disk);
    rd.bytes = wr.bytes = 4000000000;
    Placement one, four, node;
    four.world = 4, node.emulated = false, node.world = 64;
    EXPECT(near(OpTimer(p, q, one).seconds(rd), 2) && near(OpTimer(p, q, one).seconds(wr), 4), "one rank: the rates");
    EXPECT(near(OpTimer(p, q, four).seconds(rd), 8), "four emulated ranks share the disk: %g",
           OpTimer(p, q, four).seconds(rd));
    EXPECT(near(OpTimer(p, q, node).seconds(wr), 32), "a node's eight devices share its disk: %g",
           OpTimer(p, q, node).seconds(wr));
}

static void costs() {
    MemoryQuery q;
    q.cfg = gpt2_config_from_descriptor("L=2,H=4,C=64,V=512,T=64");
    q.dtype_bytes = 4, q.micro_batch = 2, q.seq_len = 32;
    Profile p = table_profile(true);
    // exact shapes, and a matmul interpolated between two: rates 1 and 4 GFLOP/s at 1 and 16 MFLOP of work;
    // at 4 MFLOP (a quarter of the way in log) the rate is exp(ln 1 + 0.5 ln 4) = 2 GFLOP/s
    p.kernels["r1"]["matmul_fwd_f32 10x50x1000x1"] = 1e-3;       // 2*10*50*1000 = 1e6 FLOP at 1e9/s
    p.kernels["r1"]["matmul_fwd_f32 10x400x2000x1"] = 16e6 / 4e9;
    p.kernels["r2"]["layernorm_fwd_f32 64x64"] = 7e-6;
    Placement one;
    OpTimer t(p, q, one);
    StepOp mm;
    mm.name = "matmul_fwd_f32", mm.dims = {10, 50, 1000, 1};
    EXPECT(near(t.seconds(mm), 1e-3), "an exact shape");
    mm.dims = {10, 100, 2000, 1};  // 4e6 FLOP
    EXPECT(near(t.seconds(mm), 4e6 / 2e9, 1e-9), "interpolated: %.9g, closed form %.9g", t.seconds(mm), 2e-3);
    mm.dims = {10, 800, 4000, 1};  // beyond the largest: its rate
    EXPECT(near(t.seconds(mm), 64e6 / 4e9), "beyond the last shape: the last rate");
    EXPECT(t.interpolated == 2, "two interpolated (%d)", t.interpolated);
    // 8 ranks on 2 cores: timed with 2 at once, 4 times as long
    Placement eight;
    eight.world = 8;
    OpTimer t8(p, q, eight);
    StepOp ln;
    ln.name = "layernorm_fwd_f32", ln.dims = {64, 64};
    EXPECT(near(t8.seconds(ln), 4 * 7e-6), "oversubscribed: %g", t8.seconds(ln));
}

static void step_flops_and_sums() {
    const std::string model = "-e L=3,H=4,C=64,V=512,T=64 -p fp32 -b 2 -t 32 -d 128";
    const double L = 3, C = 64, T = 32, tokens = 2 * 32 * 2;
    for (int V : {512, 131072})  // today's vocabularies too: no data is read, so no uint16 limit
        for (int r : {0, 2}) {
            StepSchedule s = schedule_of(model + " -r " + std::to_string(r) + " -e L=3,H=4,C=64,T=64,V=" + std::to_string(V));
            double flops = 0, Vp = padded_vocab(V);
            for (const StepOp& o : s.ops) flops += o.step == 0 ? op_flops(o.name, o.dims) : 0;
            double per_token = 6 * (12 * L * C * C + Vp * C) + 6 * L * C * T + (r == 2 ? 2 * 12 * L * C * C + 2 * L * C * T : 0);
            EXPECT(near(flops, per_token * tokens), "V %d, recompute %d: %.6g FLOP, closed form %.6g", V, r, flops,
                   per_token * tokens);
        }
    // a synchronous profile: the step is the sum of its ops, the breakdown each kind's share
    Profile p = table_profile(true);
    StepSchedule s = schedule_of(model + " -z 2 --ranks 2 -d 256");
    const MemoryQuery q = s.q;
    double sum = 0, coll = 0;
    for (const StepOp& o : s.ops) {
        if (o.kind == OpKind::HostWait) continue;
        double v = 1e-4 * (1 + o.key().size() % 7);  // any positive time per shape
        if (o.collective()) p.collectives["N2g2"][o.name + " " + std::to_string(o.bytes)] = v;
        else p.kernels["r2"][o.key()] = v;
    }
    for (const StepOp& o : s.ops) {
        if (o.kind == OpKind::HostWait || o.step != 1) continue;
        double v = o.collective() ? p.collectives["N2g2"][o.name + " " + std::to_string(o.bytes)] : p.kernels["r2"][o.key()];
        sum += v;
        if (o.collective() && o.kind != OpKind::Scalar) coll += v;
    }
    Placement two;
    two.world = 2;
    StepPrediction pr = predict_step({s}, q, p, two);
    EXPECT(near(pr.step_s, sum, 1e-9), "synchronous: %.9g, the sum %.9g", pr.step_s, sum);
    double dp = -1;
    for (const auto& e : pr.exposed)
        if (e.first == "data-parallel collectives") dp = e.second;
    EXPECT(near(dp, coll, 1e-6), "synchronous: the collectives' share %.9g, their sum %.9g", dp, coll);
    EXPECT(pr.interpolated == 0, "every shape measured (%d interpolated)", pr.interpolated);
}

static void specification_profiles() {
    // a spec profile takes a kind's efficiency from its own table, else along efficiency_from to a measured one
    const char* spec = "perf_model_spec.json";
    const char* mid = "perf_model_mid.json";
    const char* meas = "perf_model_measured.json";
    FILE* f = fopen(spec, "w");
    fprintf(f, "{\"device\": {\"peak_tflops\": 100, \"memory_gbs\": 1000, \"dtype\": \"bf16\"}, "
               "\"node\": {\"devices\": 4, \"link_gbs\": 100, \"link_latency_us\": 1}, "
               "\"network\": {\"node_gbs\": 40, \"latency_us\": 5}, \"efficiency_from\": \"%s\"}", mid);
    fclose(f);
    f = fopen(mid, "w");
    fprintf(f, "{\"device\": {\"peak_tflops\": 1}, \"efficiency\": {\"attention_fwd\": 0.25}, \"efficiency_from\": \"%s\"}",
            meas);
    fclose(f);
    f = fopen(meas, "w");  // a 2 MFLOP matmul in 1 ms at a 4 GFLOP/s peak: 50%
    fprintf(f, "{\"measured\": true, \"device\": {\"peak_tflops\": 0.004, \"memory_gbs\": 10, \"dtype\": \"fp32\"}, "
               "\"kernels\": {\"r1\": {\"matmul_fwd_f32 10x100x1000x1\": 1e-3}}}");
    fclose(f);
    Profile p = load_profile(spec);
    MemoryQuery q;
    q.cfg = gpt2_config_from_descriptor("L=2,H=4,C=64,V=512,T=64");
    q.dtype_bytes = 2, q.tp = 4, q.world = 2;
    Placement pl;
    pl.emulated = false, pl.world = 8;
    OpTimer t(p, q, pl);
    StepOp mm;
    mm.name = "matmul_fwd_16", mm.dims = {10, 100, 1000, 1};
    EXPECT(near(t.seconds(mm), 2e6 / (0.5 * 100e12)), "a matmul at the measured 50%%: %g", t.seconds(mm));
    mm.name = "matmul_fwd_gelu_16";
    EXPECT(near(t.seconds(mm), 2e6 / (0.5 * 100e12)), "the fused GELU at the matmul's efficiency");
    StepOp at;
    at.name = "attention_fwd_16", at.dims = {2, 32, 16, 1};  // 2 B T^2 C = 65536 FLOP
    EXPECT(near(t.seconds(at), 65536 / (0.25 * 100e12)), "attention at the chain's stated 25%%");
    // the tensor group (4 adjacent ranks) fills a node; the data group (2, 4 apart) spans two
    StepOp c;
    c.kind = OpKind::AllReduce, c.name = "all_reduce", c.group = "tensor", c.bytes = 1000000;
    EXPECT(near(t.seconds(c), flat_seconds("all_reduce", 1e6, 4, Tier{1e11, 1e-6})), "tensor all-reduce in a node");
    c.group = "data";
    EXPECT(near(t.seconds(c), flat_seconds("all_reduce", 1e6, 2, Tier{40e9 / 4, 5e-6})),
           "data all-reduce over the network, the node's bandwidth shared by its 4 devices");
}

static void predictor_without_pa() {
    MemoryQuery q;
    q.cfg = gpt2_config_from_descriptor("L=4,H=4,C=64,V=512,T=64");
    q.dtype_bytes = 4, q.micro_batch = 2, q.seq_len = 32, q.tp = 2, q.recompute = 2;
    double with = (double)predict_memory(q, SHARD_ALIGN).reserved.get(Arena::Device, MemKind::Activations);
    q.partition_activations = false;
    double without = (double)predict_memory(q, SHARD_ALIGN).reserved.get(Arena::Device, MemKind::Activations);
    // Pa keeps BT/t rows of each of the L saved outputs beside 2 whole ones; without, all L whole
    const double BT = 64, C = 64, L = 4, s = 4;
    EXPECT(near(without - with, (L * BT * C - 2 * BT * C - L * BT / 2 * C) * s), "without Pa: %g more bytes",
           without - with);
}

static void delayed_update() {
    const std::string run = "-e L=3,H=4,C=64,V=512,T=64 -p bf16 -b 2 -t 32 -d 256 --ranks 2 -z 2 --offload_optimizer cpu";
    for (double adamw_share : {0.5, 2.0})  // the AdamW's time over the kernels'
        for (bool delayed : {false, true}) {
            StepSchedule s = schedule_of(run + (delayed ? " --offload_delay_steps 1" : ""));
            std::vector<double> d(s.ops.size(), 0.0);
            double kernels = 0, adamw = 0, ops = 0;  // in step 1
            for (size_t i = 0; i < s.ops.size(); i++)
                if (s.ops[i].lane == Lane::Compute) d[i] = 1e-3, kernels += s.ops[i].step;
            for (size_t i = 0; i < s.ops.size(); i++) ops += s.ops[i].step && base_kind(s.ops[i].name) == "cpu_adamw";
            for (size_t i = 0; i < s.ops.size(); i++)
                if (base_kind(s.ops[i].name) == "cpu_adamw") d[i] = adamw_share * kernels * 1e-3 / ops;
            kernels *= 1e-3, adamw = adamw_share * kernels;
            std::vector<double> e = ends({s}, {d})[0];
            double want = delayed ? std::max(kernels, adamw) : kernels + adamw;
            EXPECT(near(e[1] - e[0], want, 1e-9), "%s, AdamW %.1f x the kernels: step %.6g s, want %.6g",
                   delayed ? "delayed" : "undelayed", adamw_share, e[1] - e[0], want);
        }
}

// Megatron-LM's FLOP count against NVIDIA's own table of it (Megatron-LM's
// README of September 2020, V100 DGX-2, batch 8, T 1024, V 51200): TFLOP/s
// per GPU x GPUs x the iteration's seconds. The table prints three digits.
static void megatron_flop_count() {
    struct Case { int C, NH, L, gpus; double ms, tflops; };
    const Case cases[] = {{1920, 15, 24, 1, 1121, 71.9}, {2304, 18, 30, 2, 1093, 64.2}, {3072, 24, 36, 4, 1238, 58.5},
                          {4096, 32, 42, 8, 1407, 52.2}};
    for (const Case& c : cases) {
        GPT2Config cfg = gpt2_config_from_descriptor("L=" + std::to_string(c.L) + ",H=" + std::to_string(c.NH) +
                                                     ",C=" + std::to_string(c.C) + ",V=51200,T=1024");
        const double published = c.tflops * 1e12 * c.gpus * c.ms / 1e3, ours = megatron_flops(cfg, 8, 1024, true);
        EXPECT(near(ours, published, 2e-3), "%d x %d: %.4g FLOP, NVIDIA's table %.4g", c.L, c.C, ours, published);
    }
}

// Software that does not overlap the data group's collectives: they take the compute lane.
static void data_parallel_without_overlap() {
    StepSchedule s;
    s.ops.push_back(op("a", Lane::Compute));
    StepOp ar = op("all_reduce", Lane::Comm, {0});
    ar.group = "data";
    s.ops.push_back(ar);
    s.ops.push_back(op("b", Lane::Compute));
    s.ops.push_back(op("host_wait", Lane::Host, {1}));
    s.ops.push_back(op("host_wait", Lane::Host, {2}));
    const std::vector<std::vector<double>> d = {{1, 3, 2, 0, 0}};
    LayoutRules no_overlap;
    no_overlap.overlap_data = false;
    EXPECT(near(ends({s}, d)[0][0], 4), "overlapped: a, then the all-reduce beside b (%g)", ends({s}, d)[0][0]);
    EXPECT(near(ends({s}, d, no_overlap)[0][0], 6), "not overlapped: a, the all-reduce, b (%g)",
           ends({s}, d, no_overlap)[0][0]);
    s.ops[1].group = "tensor";
    EXPECT(near(ends({s}, d, no_overlap)[0][0], 4), "only the data group's");
}

// A spec profile of the V100 cluster's kind, written here: a GEMM benchmark, DeepSpeed's reduce-scatter
// by reduces, and an anchor.
static void v100_kind_of_profile() {
    FILE* f = fopen("perf_model_gemm.csv", "w");
    // 2 GFLOP at 50% of a 100 TFLOP/s peak (40 us), 200 GFLOP at 80% (2.5 ms), and a GEMV-like row to ignore
    fprintf(f, "m,n,k,ms\n1000,1000,1000,0.04\n10000,1000,10000,2.5\n8,100000,100000,0.01\n");
    fclose(f);
    // every kind of the anchor run at a stated efficiency (the matmuls' come from the benchmark)
    const char* anchor = "-e L=2,H=4,C=64,V=512,T=64 -t 64 -b 2 -p fp16 -r 2 -z 0";
    std::string kinds;
    {
        const TrainOptions o = options_from_flags(anchor);
        const RunSetup run = make_run_setup(o);
        const std::vector<RecordedRank> dry = dry_run(o, run);
        for (const StepOp& op : dry[0].ops)
            if (!op.collective() && !op.transfer() && op.kind != OpKind::HostWait && kinds.find("\"" + base_kind(op.name) + "\"") == std::string::npos)
                kinds += (kinds.empty() ? "\"" : ", \"") + base_kind(op.name) + "\": 0.5";
    }
    f = fopen("perf_model_v100.json", "w");
    fprintf(f, "{\"efficiency\": {%s}, ", kinds.c_str());
    fprintf(f, "\"device\": {\"peak_tflops\": 100, \"memory_gbs\": 1000, \"dtype\": \"fp16\", \"memory_gib\": 80}, "
               "\"node\": {\"devices\": 4, \"link_gbs\": 100, \"link_latency_us\": 1}, "
               "\"network\": {\"node_gbs\": 40, \"latency_us\": 5}, \"matmul_curve\": \"perf_model_gemm.csv\", "
               "\"host\": {\"pcie_gbs\": 10, \"pcie_latency_us\": 1, \"cpu_adamw_params_per_s\": 1e9, \"memory_gbs\": 100}, "
               "\"software\": {\"reduce_scatter_by_reduces_bucket\": 1e6}, "
               "\"anchor\": {\"flags\": \"%s\", \"tflops\": 0.5, \"peak_tflops\": 125}, "
               "\"efficiency_from\": \"perf_model_measured.json\"}", anchor);
    fclose(f);
    Profile p = load_profile("perf_model_v100.json");
    EXPECT(p.matmul_curve.size() == 2, "the GEMV-like row left out (%zu points)", p.matmul_curve.size());
    MemoryQuery q;
    q.cfg = gpt2_config_from_descriptor("L=2,H=4,C=64,V=512,T=64");
    q.dtype_bytes = 2, q.tp = 1, q.world = 8, q.stage = 2;
    Placement pl;
    pl.emulated = false, pl.world = 8;
    OpTimer t(p, q, pl);
    StepOp mm;
    mm.name = "matmul_fwd_16", mm.dims = {1000, 1000, 1000, 1};
    EXPECT(near(t.seconds(mm), 40e-6), "a benchmarked shape's own time: %g", t.seconds(mm));
    mm.name = "matmul_bwd_16", mm.dims = {1000, 1000, 1000, 1};  // two 2 GFLOP GEMMs
    EXPECT(near(t.seconds(mm), 80e-6), "a backward: two GEMMs of its work (%g)", t.seconds(mm));
    mm.name = "matmul_fwd_16", mm.dims = {10000, 1000, 1000, 1};  // 20 GFLOP: halfway in log(work)
    EXPECT(near(t.seconds(mm), 20e9 / (0.65 * 100e12)), "between them, linear in log(work): %g", t.seconds(mm));
    // the stage-2 reduce-scatter of the data group (8 ranks, 4 a node on 2 nodes): 10 buckets of 1e6 fp16
    // elements, each 8 reduces of 7 ring steps at the network's latency, beyond the reduce-scatter itself
    StepOp rs;
    rs.kind = OpKind::ReduceScatter, rs.name = "reduce_scatter", rs.group = "data", rs.bytes = 20000000;
    const double plain = cluster_collective_seconds("reduce_scatter", 2e7, 4, 2, Tier{1e11, 1e-6}, Tier{1e10, 5e-6});
    EXPECT(near(t.seconds(rs), plain + 10 * 8 * 7 * 5e-6), "reduce-scatter by reduces: %g", t.seconds(rs));
    q.stage = 1;
    EXPECT(near(OpTimer(p, q, pl).seconds(rs), plain), "stage 1's is NCCL's own");
    // the anchor: its run, predicted on the anchored profile, takes its published time on this device's peak
    Profile a = anchored_profile(p);
    const TrainOptions o = options_from_flags(p.anchor_flags);
    const RunSetup run = make_run_setup(o);
    const double want = megatron_flops(run.cfg, 2, 64, true) / 0.5e12 * 125 / 100;
    EXPECT(a.compute_scale > 0 && near(predict_run(o, run, a).step_s, want, 1e-9), "anchored: %.9g s, published %.9g s",
           predict_run(o, run, a).step_s, want);
}

// Weak scaling at today's scale, on h100_dgx.json: a 2,048-GPU run (8-way tensor
// groups, 2 pipeline stages, 128 data-parallel ranks, a 128K vocabulary), the same
// with 8 times the data-parallel ranks (16,384 GPUs), and with 100,000 GPUs:
// beyond any world this process could emulate, which a dry run, standing one
// rank for each stage, never builds. Each rank's work stays the same (its shard
// of the states only shrinks), so what grows is its data group's collectives.
// Each spans n nodes (a tensor group fills a node), a ring of (n - 1) a +
// (n - 1)/n S/B at stage 1 (a tree all-reduce's 2 ceil(log2 n) a + 2 S/B grows
// less): at most R = (n' - 1)/(n - 1) times as long, padding changing S by well
// under 1%. So the step may not shrink, and may grow by at most (R - 1) times
// the data group's collectives of the smaller run, even if every one of them lay
// on its critical path. Memory per rank: the dry run's equals the predictor's.
static void weak_scaling(const std::string& folder) {
    const Profile dgx = load_profile(folder + "/h100_dgx.json");
    double step = 0, collectives = 0;
    int nodes = 0;
    for (int gpus : {2048, 16384, 100000}) {
        const long dp = gpus / 16, tokens = 4096L * dp * 4;  // 4 micro-steps of B 1, T 4096 on every data rank
        TrainOptions o = options_from_flags("-e L=8,H=16,C=2048,V=131072,T=4096 -t 4096 -b 1 -p bf16 -z 1 --tp 8 "
                                            "--pp 2 -d " + std::to_string(tokens) + " --predict " + folder +
                                            "/h100_dgx.json --nodes " + std::to_string(gpus / 8));
        prepare_prediction(o);
        const RunSetup run = make_run_setup(o);
        const std::vector<RecordedRank> dry = dry_run(o, run);
        const std::vector<StepSchedule> stages = step_schedules(dry, run);
        const StepPrediction s = predict_step(stages, run.memory_query(o), dgx, {false, run.world});
        for (const RecordedRank& d : dry)
            EXPECT(d.reserved.total(Arena::Device) == predict_memory(d.q, SHARD_ALIGN).reserved.total(Arena::Device),
                   "%d GPUs, stage %d: the dry run's memory against the predictor's", gpus, d.stage);
        double data = 0;  // the data group's collectives of one steady step, every stage's
        for (const StepSchedule& st : stages) {
            OpTimer t(dgx, st.q, {false, run.world});
            for (const StepOp& op : st.ops) data += op.step == 1 && op.collective() && op.group == "data" ? t.seconds(op) : 0;
        }
        const int n = (int)dp;  // each data rank on its own node
        if (step > 0) {
            const double R = (double)(n - 1) / (nodes - 1);
            EXPECT(data >= collectives && data <= R * collectives, "%d GPUs: the data collectives %.4g s, %.4g s at "
                   "1/%.3g the data ranks (R %.4g)", gpus, data, collectives, (double)n / nodes, R);
            EXPECT(s.step_s >= step && s.step_s <= step + (R - 1) * collectives,
                   "%d GPUs: step %.4g s; at 1/%.3g the data ranks %.4g s, its data collectives %.4g s, R %.4g", gpus,
                   s.step_s, (double)n / nodes, step, collectives, R);
        }
        step = s.step_s, collectives = data, nodes = n;
    }
}

// Every operation any flag combination can record, on every shipped profile in
// the role --predict gives it on a cluster: a specification profile as itself,
// a measured one as what a cluster profile's kernel efficiencies come from
// (efficiency_from). Each must take a finite time: a kernel kind the measured
// profile never timed (-r 1's GELU, which h100_measured.json's runs fused into
// the matmul) falls back to a device copy of its bytes there, and the
// prediction says so. A profile without a network between nodes is held to one
// node, and one without disk rates cannot time NVMe offload (both refused with a
// one-line error; test_cli_errors). Run twice by ctest: without and with every
// prepared variant (ZERO_VARIANTS), which record kinds of their own.
static void op_kinds_on_profiles(const std::string& folder) {
    struct Seen { StepOp op; MemoryQuery q; int world; };
    std::map<std::string, Seen> kinds;  // one op of each name, group and world size, with its run
    const std::string model = "-e L=2,H=4,C=64,V=512,T=64 -t 32 -b 2 ";
    const char* grids[] = {"-d 128", "--ranks 2 -d 256", "--ranks 2 --tp 2 -d 128", "--ranks 2 --tp 2 --sp 1 -d 128",
                           "--ranks 2 --pp 2 -d 128"};
    const char* states[] = {"-z 0", "-z 1", "-z 2", "-z 3", "-z 2 --offload_optimizer cpu",
                            "-z 2 --offload_optimizer cpu --offload_grad_accum device",
                            "-z 3 --offload_optimizer cpu --offload_param cpu",
                            "-z 2 --offload_optimizer cpu --offload_delay_steps 1",
                            "-z 1 --offload_optimizer nvme --nvme_path ."};
    for (const char* p : {"fp32", "bf16", "fp16"})
        for (int r = 0; r <= 2; r++)
            for (const char* g : grids)
                for (const char* z : states) {
                    std::string flags = model + "-p " + p + " -r " + std::to_string(r) + " " + g + " " + z;
                    if (r == 2) flags += " --offload_activations 1";
                    const TrainOptions o = options_from_flags(flags);
                    const RunSetup run = make_run_setup(o);
                    for (const RecordedRank& d : dry_run(o, run))
                        for (const StepOp& op : d.ops)
                            kinds.insert({op.name + " " + op.group + " of " + std::to_string(run.world), Seen{op, d.q, run.world}});
                }
    std::vector<std::string> names;
    for (const char* f : {"cpu.json", "h100.json", "h100_dgx.json", "h100_measured.json", "v100_dgx2.json"})
        names.push_back(folder + "/" + f);
    int timed = 0;
    for (const std::string& name : names) {
        Profile p = load_profile(name);
        if (p.measured) {  // as a cluster profile's source of efficiencies: a node of 8 of its devices
            FILE* f = fopen("perf_model_on_measured.json", "w");
            fprintf(f, "{\"device\": {\"peak_tflops\": %g, \"memory_gbs\": %g, \"memory_gib\": 80}, "
                       "\"node\": {\"devices\": 8, \"link_gbs\": 100, \"link_latency_us\": 3}, "
                       "\"network\": {\"node_gbs\": 100, \"latency_us\": 10}, \"host\": {\"pcie_gbs\": 20, "
                       "\"pcie_latency_us\": 10, \"cpu_adamw_params_per_s\": 1e9, \"memory_gbs\": 100}, "
                       "\"efficiency_from\": \"%s\"}", p.peak_tflops, p.hbm_gbs, name.c_str());
            fclose(f);
            p = load_profile("perf_model_on_measured.json");
        }
        p = anchored_profile(p);
        for (const auto& k : kinds) {
            const Seen& s = k.second;
            if ((s.world > p.devices_per_node && p.network_gbs <= 0) || (s.op.disk() && p.disk_read_gbs <= 0)) continue;
            const double t = OpTimer(p, s.q, Placement{false, s.world}).seconds(s.op);
            EXPECT(std::isfinite(t) && t >= 0, "%s: %s takes %g s", name.c_str(), k.first.c_str(), t);
            timed++;
        }
    }
    EXPECT(kinds.size() > 40 && timed > 100, "%zu kinds, %d timed", kinds.size(), timed);
    // the GELU -r 1 recomputes is a kernel h100_measured.json never timed: a device copy of its bytes, and said so
    const TrainOptions o = options_from_flags("-e L=2,H=4,C=64,V=512,T=64 -t 64 -b 8 -p bf16 -r 1");
    const Profile dgx = load_profile(folder + "/h100_dgx.json");
    const StepPrediction s = predict_run(o, make_run_setup(o), dgx);
    EXPECT(s.unmeasured.size() == 1 && s.unmeasured.begin()->find("gelu_fwd_16 on ") == 0, "%zu unmeasured kinds",
           s.unmeasured.size());
    StepOp gelu = named("gelu_fwd_16"), copy = named("copy");
    gelu.dims = {1 << 20}, copy.dims = {2 << 20};  // 2^20 bf16 elements read and written: 4 MiB, a copy of 2 MiB
    OpTimer t(dgx, make_run_setup(o).memory_query(o), Placement{false, 8});
    EXPECT(near(t.seconds(gelu), t.seconds(copy)), "gelu %g s, the copy of its bytes %g s", t.seconds(gelu),
           t.seconds(copy));
}

int main(int argc, char** argv) {
    const std::vector<std::string> args = test_args(argc, argv, "<zero/perf/profiles> [kinds]");
    op_kinds_on_profiles(args[0]);
    if (argc > 2 && std::string(argv[2]) == "kinds") return test_summary("perf_model (op kinds)");
    collectives();
    weak_scaling(args[0]);
    layout_in_time();
    disk_beside_the_thread();
    pipelines();
    costs();
    step_flops_and_sums();
    specification_profiles();
    predictor_without_pa();
    delayed_update();
    megatron_flop_count();
    data_parallel_without_overlap();
    v100_kind_of_profile();
    return test_summary("perf_model");
}

// --trace FILE (zero/perf/trace.h), read back as the viewers read it
// (test/trace_viewers.h: Perfetto's import rules and DevTools' arithmetic):
//   * predicted steps (README's d12 on h100_dgx.json; make reproduce's 1.5B
//     stage 3 on v100_dgx2.json, whose software does not overlap the data
//     group's collectives; a 2 x 2 x 2 grid with offload): every op of the dry
//     run's steady step there once, on the lane and at the time the model
//     placed it (the model's own timeline, read here), none before what it
//     waits for or the op before it on its own stream; an arrow for every
//     receive, from its send;
//   * real steps (NVMe with small tiles; --tp 2 --pp 2 with 4 micro-batches;
//     the delayed update): the dry run's ops again, once each, on their lanes
//     or, for concurrent work, on the tracks of their ring buffer or peer
//     stage, each after what it waits for (a host wait ends after it), the
//     ranks on one clock; the delayed AdamW's units are the model's units;
//   * in every trace: no slice dropped by either viewer, every arrow bound
//     send -> receive in both, each track's slices in list order and never
//     overlapping; planted: the old printing (ts and dur apart, three decimals
//     of doubles) is caught;
//   * the file: strings escaped, written whole or not at all (a file size
//     limit leaves the old one, with the reason), and --trace where nothing
//     is traced, or to a path that cannot be written, is one line at once.
//
// usage: test_trace <train_gpt2_zero_cpu>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test/trace_viewers.h"
#include "test/trainer_run.h"
#include "zero/reproduce/paper_throughput.h"

namespace {

struct Slice {
    std::string name, kind, lane;
    int tid = -1, op = -1, unit = -1;
    double ts = 0, dur = 0;
    std::vector<int> after;
};
struct Read {
    JsonValue doc;
    std::map<int, std::map<int, Slice>> ranks;  // pid -> op -> its slice
    std::map<int, int> seen;                     // (pid * 1e6 + op) -> how many slices
    int flows_out = 0, flows_in = 0;
    double step_s = 0;
    std::string threads;
};

Read read_trace(const std::string& path) {
    Read r;
    r.doc = parse_json_file(path);
    r.step_s = r.doc.find("otherData")->find("step_s")->as_number();
    r.threads = r.doc.find("otherData")->find("threads")->as_string();
    for (const JsonValue& e : r.doc.find("traceEvents")->as_array()) {
        const std::string ph = e.find("ph")->as_string();
        r.flows_out += ph == "s", r.flows_in += ph == "f";
        if (ph != "X") continue;
        Slice s;
        const JsonValue& args = *e.find("args");
        s.name = e.find("name")->as_string(), s.kind = args.find("kind")->as_string();
        s.lane = args.find("lane")->as_string(), s.unit = (int)args.find("unit")->as_integer();
        s.tid = (int)e.find("tid")->as_integer(), s.op = (int)args.find("op")->as_integer();
        s.ts = e.find("ts")->as_number(), s.dur = e.find("dur")->as_number();
        for (const JsonValue& a : args.find("after")->as_array()) s.after.push_back((int)a.as_integer());
        const int pid = (int)e.find("pid")->as_integer();
        r.seen[pid * 1000000 + s.op]++;
        r.ranks[pid][s.op] = s;
    }
    return r;
}

// Where a real run draws op i: concurrent work on a track of its own, the rest on its lane.
bool on_its_track(const StepOp& op, int tid) {
    if (op.p2p()) return tid == PIPE_TRACK + 2 * op.peer + (op.kind == OpKind::Recv);
    if (op.disk()) return tid >= DISK_BUFFER_TRACK && tid < PIPE_TRACK;
    return tid == (int)op.lane;
}

// The trace of `rank` holds the steady step of `ops` (a dry run's, steps 0 and 1) op for op; `lanes`: where
// the model placed each (a predicted trace), or empty (a real one).
void check_rank(const char* what, const Read& t, int rank, const std::vector<StepOp>& ops, const std::vector<Lane>& lanes) {
    const bool measured = lanes.empty();
    int first = 0;
    while (first < (int)ops.size() && ops[first].step != 1) first++;
    auto it = t.ranks.find(rank);
    EXPECT(it != t.ranks.end(), "%s: no track for rank %d", what, rank);
    if (it == t.ranks.end()) return;
    const std::map<int, Slice>& got = it->second;
    EXPECT(got.size() == ops.size() - first, "%s, rank %d: %zu slices, %zu ops in the dry run's step", what, rank,
           got.size(), ops.size() - first);
    int bad = 0;
    for (int i = first; i < (int)ops.size() && bad < 5; i++) {
        const StepOp& op = ops[i];
        auto s = got.find(i - first);
        const bool once = s != got.end() && t.seen.at(rank * 1000000 + i - first) == 1;
        const bool placed = once && (measured ? on_its_track(op, s->second.tid) : s->second.tid == (int)lanes[i]);
        const bool same = placed && s->second.name == op.name && s->second.kind == op_kind_name(op.kind) &&
                          s->second.lane == lane_name(op.lane) && s->second.unit == op.unit;
        EXPECT(same, "%s, rank %d, op %d (%s on the %s, unit %d): %s", what, rank, i - first, op.name.c_str(),
               lane_name(op.lane), op.unit, !once ? "not there once" : ("there as " + s->second.name + " on track " +
                   std::to_string(s->second.tid) + ", unit " + std::to_string(s->second.unit)).c_str());
        if (!same) {
            bad++;
            continue;
        }
        // a stream runs its ops in order, whatever lane the model drew one on (the op before it on its own lane)
        std::vector<int> waits = s->second.after;
        for (int b = i - 1; !measured && op.lane != Lane::Host && b >= first; b--)
            if (ops[b].lane == op.lane) {
                waits.push_back(b - first);
                break;
            }
        for (int a : waits) {
            auto w = got.find(a);
            if (w == got.end()) continue;
            // (a measured host wait is the time spent waiting: it ends after what it waits for)
            const double must = w->second.ts + w->second.dur - 0.002,
                         at = measured && op.kind == OpKind::HostWait ? s->second.ts + s->second.dur : s->second.ts;
            EXPECT(at >= must, "%s, rank %d: op %d (%s) at %.3f us, before op %d (%s) ends at %.3f us", what, rank,
                   i - first, op.name.c_str(), at, a, w->second.name.c_str(), must);
            bad += at < must;
        }
    }
}

// Each track's slices in list order (a stream or a thread runs its ops in the order they were issued), each
// starting once the one before it has ended (whole ns, as written).
void check_tracks(const char* what, const Read& t) {
    int bad = 0;
    for (const auto& [pid, slices] : t.ranks) {
        std::map<int, std::vector<const Slice*>> tracks;
        for (const auto& [op, s] : slices) tracks[s.tid].push_back(&s);
        for (auto& [tid, list] : tracks) {
            std::stable_sort(list.begin(), list.end(), [](const Slice* a, const Slice* b) { return a->ts < b->ts; });
            for (size_t k = 1; k < list.size() && bad < 5; k++) {
                const Slice &a = *list[k - 1], &b = *list[k];
                const bool ok = a.op < b.op && std::llround(b.ts * 1000) >= std::llround(a.ts * 1000) + std::llround(a.dur * 1000);
                EXPECT(ok, "%s: rank %d, track %d: op %d (%s, %.3f us + %.3f) then op %d (%s, at %.3f us)", what, pid,
                       tid, a.op, a.name.c_str(), a.ts, a.dur, b.op, b.name.c_str(), b.ts);
                bad += !ok;
            }
        }
    }
}

// Both viewers keep every slice and bind every arrow, one per receive.
void check_viewers(const char* what, const Read& t, int recvs) {
    const ViewerReplay v = replay_viewers(t.doc);
    std::string problems;
    for (const std::string& p : v.problems) problems += "\n  " + p;
    EXPECT(v.perfetto_dropped == 0 && v.devtools_dropped == 0, "%s: of %d slices Perfetto drops %d, DevTools %d:%s", what,
           v.slices, v.perfetto_dropped, v.devtools_dropped, problems.c_str());
    EXPECT(std::is_sorted(v.devtools_order.begin(), v.devtools_order.end()), "%s: DevTools shows rank %d first", what,
           v.devtools_order.empty() ? -1 : v.devtools_order[0]);
    EXPECT(v.flows == recvs && v.perfetto_bound == recvs && v.devtools_bound == recvs,
           "%s: %d receives, %d arrows, bound send -> receive by Perfetto %d, by DevTools %d:%s", what, recvs, v.flows,
           v.perfetto_bound, v.devtools_bound, problems.c_str());
}

int step_recvs(const std::vector<RecordedRank>& dry) {
    int n = 0;
    for (const RecordedRank& d : dry)
        for (const StepOp& op : d.ops) n += op.step == 1 && op.kind == OpKind::Recv;
    return n;
}

// The old printing: ts and dur apart, three decimals of doubles. The viewers must lose slices of it.
std::string old_printing(const std::vector<RecordedRank>& dry, const Timeline& tl) {
    std::string out = "{\"traceEvents\": [";
    for (size_t k = 0; k < dry.size(); k++)
        for (size_t i = 0; i < dry[k].ops.size(); i++)
            if (dry[k].ops[i].step == 1)
                out += strf("%s{\"ph\": \"X\", \"name\": \"x\", \"cat\": \"c\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                            "\"dur\": %.3f, \"args\": {\"op\": %zu, \"kind\": \"k\", \"bytes\": 0}}",
                            out.back() == '[' ? "" : ",", dry[k].rank, (int)tl.lane[k][i], tl.start[k][i] * 1e6,
                            (tl.end[k][i] - tl.start[k][i]) * 1e6, i);
    return out + "]}";
}

// A predicted trace, against the model's own step: `flags` (a cluster profile's: --predict P --nodes N), or a run
// set up in-process (o, run) with the trace written by predict_run.
void check_predicted(const char* what, const TrainOptions& o, const RunSetup& run, const Profile& prof,
                     const std::string& path, bool planted = false) {
    const std::vector<RecordedRank> dry = dry_run(o, run);
    const StepPrediction s = predict_step(step_schedules(dry, run), run.memory_query(o), prof, {prof.measured, run.world});
    const Read t = read_trace(path);
    for (size_t k = 0; k < dry.size(); k++) check_rank(what, t, dry[k].rank, dry[k].ops, s.timeline.lane[k]);
    EXPECT(t.ranks.size() == dry.size(), "%s: %zu tracks, %zu stages", what, t.ranks.size(), dry.size());
    EXPECT(std::fabs(t.step_s - s.step_s) <= 1e-6 * s.step_s, "%s: the trace's step %.9g s, the model's %.9g s", what,
           t.step_s, s.step_s);
    EXPECT(t.threads == lanes_in_words(s.timeline.rules), "%s: the trace says its lanes are run so: %s", what,
           t.threads.c_str());
    check_tracks(what, t);
    check_viewers(what, t, step_recvs(dry));
    if (planted) {
        const ViewerReplay v = replay_viewers(parse_json(old_printing(dry, s.timeline)));
        EXPECT(v.perfetto_dropped > 0 && v.devtools_dropped > 0,
               "%s, printed the old way: the replay finds no dropped slice (Perfetto %d, DevTools %d of %d)", what,
               v.perfetto_dropped, v.devtools_dropped, v.slices);
        printf("%s, printed the old way: Perfetto drops %d of %d slices, DevTools %d\n", what, v.perfetto_dropped,
               v.slices, v.devtools_dropped);
    }
    printf("%s: %zu ranks' steps, %d receives with their arrows, step %.4g ms: as the model, in both viewers\n", what,
           dry.size(), step_recvs(dry), 1e3 * t.step_s);
}

TrainOptions predicted_options(const std::string& flags) {
    TrainOptions o = options_from_flags(flags);
    prepare_prediction(o);
    resolve_batch(o);
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "trace";
    fresh_dir(dir);
    make_dir(dir + "/disk");
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);
    const std::string profiles = base.trainer.substr(0, base.trainer.rfind('/') + 1) + "zero/perf/profiles";

    // predicted: README's d12 on one H100 node, through the trainer's command line
    const std::string d12 = "-e d12 -t 1024 -b 8 -z 3 -p bf16 --predict " + profiles + "/h100_dgx.json --nodes 1";
    TrainerRun cli = base;
    cli.extra = d12 + " --trace " + dir + "/d12.json";
    cli.run();
    {
        const TrainOptions o = predicted_options(d12);
        check_predicted("predicted d12", o, make_run_setup(o), anchored_profile(load_profile(o.predict)),
                        dir + "/d12.json", true);
    }
    // predicted: make reproduce's stage-3 step of the paper's 1.5B model on 400 V100s (overlap off)
    {
        const TrainOptions o = options_from_flags(cluster_flags(stage3_trace_run(), stage3_trace_run().batch));
        const RunSetup run = make_run_setup(o);
        const Profile v100 = anchored_profile(load_profile(profiles + "/v100_dgx2.json"));
        const StepPrediction s = predict_run(o, run, v100, dir + "/stage3.json");
        check_predicted("predicted 1.5B, stage 3, V100", o, run, v100, dir + "/stage3.json");
        int on_compute = 0;
        const Read t = read_trace(dir + "/stage3.json");
        for (const auto& [op, sl] : t.ranks.begin()->second)
            on_compute += sl.kind == "all_gather" && sl.tid == (int)Lane::Compute;
        EXPECT(!v100.overlap_data_parallel && on_compute > 0 && s.step_s > 0,
               "predicted 1.5B: %d all-gathers drawn on the compute stream, where the model runs them", on_compute);
    }
    // predicted: 8 ranks (2 x 2 x 2) with offload, on a cluster profile
    {
        const std::string flags = std::string("-e ") + TINY_4_LAYERS + " -t 32 -b 2 -d 512 -z 2 --tp 2 --pp 2 " +
                                  "--offload_optimizer cpu --predict " + profiles + "/h100_dgx.json --nodes 1";
        TrainerRun grid = base;
        grid.extra = flags + " --trace " + dir + "/grid.json";
        grid.run();
        const TrainOptions o = predicted_options(flags);
        check_predicted("predicted 2 x 2 x 2", o, make_run_setup(o), anchored_profile(load_profile(o.predict)),
                        dir + "/grid.json");
    }

    // real steps: NVMe with small tiles; tensor and pipeline parallelism with 4 micro-batches; the delayed update
    for (const auto& [ranks, real] : std::vector<std::pair<int, std::string>>{
             {4, "-z 2 -d 256 --offload_optimizer nvme --nvme_tile_kib 4 --nvme_path " + dir + "/disk"},
             {8, "-z 3 --tp 2 --pp 2 -d 512 --offload_optimizer cpu"},
             {2, "-z 2 -d 128 --offload_optimizer cpu --offload_delay_steps 1"}}) {
        TrainerRun run = base;
        run.model = TINY_4_LAYERS, run.train = dir + "/train.bin", run.ranks = ranks, run.micro_batch = 2;
        run.seq_len = 32, run.steps = real.find("delay") != std::string::npos ? 4 : 3, run.checkpoint_every = -1;
        run.extra = real + " --trace " + dir + "/measured.json";
        const RunResult r = run.run();
        TrainOptions o = options_from_flags("-e " + std::string(TINY_4_LAYERS) + " -b 2 -t 32 --ranks " +
                                            std::to_string(ranks) + " " + real);
        const RunSetup setup = make_run_setup(o);
        std::vector<int> all;
        for (int k = 0; k < ranks; k++) all.push_back(k);
        const std::vector<RecordedRank> dry = dry_run(o, setup, all);
        const Read t = read_trace(dir + "/measured.json");
        const std::string what = "measured, " + real;
        for (const RecordedRank& d : dry) check_rank(what.c_str(), t, d.rank, d.ops, {});
        EXPECT((int)t.ranks.size() == ranks && t.step_s > 0, "%s: %zu tracks, step %g s", what.c_str(), t.ranks.size(),
               t.step_s);
        EXPECT(t.threads.find("the rank's thread") != std::string::npos, "%s: the trace says its lanes are run so: %s",
               what.c_str(), t.threads.c_str());
        EXPECT(r.output.find("the traced step took") != std::string::npos, "%s: no line on what tracing cost:\n%s",
               what.c_str(), r.output.c_str());
        check_tracks(what.c_str(), t);
        check_viewers(what.c_str(), t, step_recvs(dry));
        if (real.find("delay") != std::string::npos) {  // one delayed AdamW per unit, labelled with its unit
            std::multiset<int> units;
            for (const auto& [op, s] : t.ranks.at(0))
                if (s.lane == lane_name(Lane::Update) && s.name.rfind("cpu_adamw", 0) == 0) units.insert(s.unit);
            const int n = (int)ParamLayout(setup.cfg, 1).num_units();
            bool each_once = (int)units.size() == n;
            for (int u = 0; u < n; u++) each_once = each_once && units.count(u) == 1;
            EXPECT(each_once, "%s: %zu delayed AdamW slices for %d units, not one each", what.c_str(), units.size(), n);
        }
        printf("%s: %d ranks' steps, every op once, on its track, in both viewers\n", what.c_str(), ranks);
    }

    // the file: strings escaped (a profile's path in its "about"), written whole or not at all
    const std::string odd = dir + "/a\"b\\c";
    CHECK(system(("mkdir -p '" + odd + "' && cp " + profiles + "/*.json '" + odd + "'").c_str()) == 0, "copy the profiles");
    TrainerRun escaped = base;
    escaped.extra = "-e d12 -t 1024 -b 8 -z 3 -p bf16 --predict '" + odd + "/h100_dgx.json' --nodes 1 --trace " + dir + "/odd.json";
    escaped.run();
    EXPECT(read_trace(dir + "/odd.json").doc.find("otherData")->find("about")->as_string().find(odd) != std::string::npos,
           "the profile's path is not in the trace's about");
    const std::string good = read_file_bytes(dir + "/d12.json");
    const CommandResult full = run_command("ulimit -f 40 && exec " + cli.command());
    EXPECT(full.status != 0 && full.output.find("error: cannot") != std::string::npos &&
               full.output.find("File too large") != std::string::npos && read_file_bytes(dir + "/d12.json") == good &&
               !file_exists(dir + "/d12.json.tmp"),
           "a trace over the file size limit: status %d, the old file %s:\n%s", full.status,
           read_file_bytes(dir + "/d12.json") == good ? "kept" : "LOST", full.output.c_str());

    // --trace where nothing is traced, or where it cannot be written: one line, before anything runs
    const std::string tiny = "-e " + std::string(TINY) + " -t 32 -i " + dir + "/train.bin ";
    expect_one_line_error(base, tiny + "--dry_run 1 --trace " + dir + "/x.json", 1, "--trace of a dry run needs --predict PROFILE");
    expect_one_line_error(base, tiny + "--estimate 1 --trace " + dir + "/x.json", 1, "--estimate 1 runs neither");
    expect_one_line_error(base, tiny + "--sample x --trace " + dir + "/x.json", 1, "--sample runs neither");
    expect_one_line_error(base, tiny + "-x 1 --trace " + dir + "/x.json", 1, "first steady step, step 2");
    expect_one_line_error(base, tiny + "-x 2 --offload_optimizer cpu --offload_delay_steps 1 --trace " + dir + "/x.json", 1,
                          "first steady step, step 3");
    expect_one_line_error(base, tiny + "-x 2 --trace " + dir + "/train.bin/x.json", 1, "cannot");
    return test_summary("trace");
}

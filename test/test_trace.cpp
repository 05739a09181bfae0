// --trace FILE (zero/perf/trace.h), read back as a viewer would:
//   * a dry run's (--predict, a cluster profile, a dp x tp x pp grid with
//     offload): every op of the dry run's steady step is there once, named as
//     it is, on its lane, none starting before the ops it waits for have
//     ended; an arrow for every receive, from its send; the trace's step time
//     is the model's;
//   * a real run's (the trainer's own step, captured as it ran, with the
//     pipeline, offload and NVMe's disk): the dry run's ops again, once each,
//     on their lanes, each after what it waits for (a host wait ends after
//     it), the ranks' timelines on one clock (each receive after its send);
//   * --trace on a dry run without a profile: one line, status 1.
//
// usage: test_trace <train_gpt2_zero_cpu>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "test/trainer_run.h"
#include "zero/base/json.h"
#include "zero/run/predict_report.h"

namespace {

struct Slice {
    std::string name, cat;
    int tid = -1, op = -1;
    double ts = 0, dur = 0;
    std::vector<int> after;
};
struct Read {
    std::map<int, std::map<int, Slice>> ranks;  // pid -> op -> its slice
    std::map<int, int> seen;                     // (pid * 1e6 + op) -> how many slices
    int flows_out = 0, flows_in = 0;
    std::map<int, double> flow_from, flow_to;  // id -> the send's time, the receive's
    double step_s = 0;
};

Read read_trace(const std::string& path) {
    Read r;
    const JsonValue doc = parse_json_file(path);
    r.step_s = doc.find("otherData")->find("step_s")->as_number();
    for (const JsonValue& e : doc.find("traceEvents")->as_array()) {
        const std::string ph = e.find("ph")->as_string();
        r.flows_out += ph == "s", r.flows_in += ph == "f";
        if (ph == "s" || ph == "f")
            (ph == "s" ? r.flow_from : r.flow_to)[(int)e.find("id")->as_integer()] = e.find("ts")->as_number();
        if (ph != "X") continue;
        Slice s;
        const JsonValue& args = *e.find("args");
        s.name = e.find("name")->as_string(), s.cat = e.find("cat")->as_string();
        s.tid = (int)e.find("tid")->as_integer(), s.op = (int)args.find("op")->as_integer();
        s.ts = e.find("ts")->as_number(), s.dur = e.find("dur")->as_number();
        for (const JsonValue& a : args.find("after")->as_array()) s.after.push_back((int)a.as_integer());
        const int pid = (int)e.find("pid")->as_integer();
        r.seen[pid * 1000000 + s.op]++;
        r.ranks[pid][s.op] = s;
    }
    return r;
}

// The trace of `rank` holds the steady step of `ops` (a dry run's, steps 0 and 1) op for op.
void check_rank(const char* what, const Read& t, int rank, const std::vector<StepOp>& ops, bool measured) {
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
        const bool same = once && s->second.name == op.name && s->second.cat == op_kind_name(op.kind) &&
                          s->second.tid == (int)op.lane;
        EXPECT(same, "%s, rank %d, op %d (%s on the %s): %s", what, rank, i - first, op.name.c_str(),
               lane_name(op.lane), !once ? "not there once" : ("there as " + s->second.name + " on lane " +
                                                                 std::to_string(s->second.tid)).c_str());
        if (!same) {
            bad++;
            continue;
        }
        for (int a : s->second.after) {
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

// Every receive on one clock with its send: not before it.
void check_arrows(const char* what, const Read& t) {
    for (const auto& [id, to] : t.flow_to) {
        auto from = t.flow_from.find(id);
        EXPECT(from != t.flow_from.end() && to >= from->second - 0.002, "%s: arrow %d: a receive at %.3f us, its send at %.3f",
               what, id, to, from == t.flow_from.end() ? NAN : from->second);
    }
}

}  // namespace

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "trace";
    fresh_dir(dir);
    make_dir(dir + "/disk");
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);

    // a dry run's: the predicted step of 8 ranks (2 x 2 x 2) on a cluster profile
    const std::string profile = base.trainer.substr(0, base.trainer.rfind('/') + 1) + "zero/perf/profiles/h100_dgx.json";
    TrainerRun predicted = base;
    predicted.extra = std::string("-e ") + TINY_4_LAYERS + " -t 32 -b 2 -d 512 -z 2 --tp 2 --pp 2 --offload_optimizer cpu " +
                      "--predict " + profile + " --nodes 1 --trace " + dir + "/predicted.json";
    predicted.run();
    {
        TrainOptions o = options_from_flags(predicted.extra.substr(0, predicted.extra.find(" --trace")));
        prepare_prediction(o);
        resolve_batch(o);
        const RunSetup run = make_run_setup(o);
        const std::vector<RecordedRank> dry = dry_run(o, run);
        const Profile prof = anchored_profile(load_profile(o.predict));
        Placement pl;
        pl.emulated = prof.measured, pl.world = run.world;
        const StepPrediction s = predict_step(step_schedules(dry, run), run.memory_query(o), prof, pl);
        const Read t = read_trace(dir + "/predicted.json");
        int recvs = 0;
        for (const RecordedRank& d : dry) {
            check_rank("predicted", t, d.rank, d.ops, false);
            for (const StepOp& op : d.ops) recvs += op.step == 1 && op.kind == OpKind::Recv;
        }
        EXPECT(t.ranks.size() == dry.size() && dry.size() == 2, "predicted: %zu tracks, %zu stages", t.ranks.size(),
               dry.size());
        EXPECT(std::fabs(t.step_s - s.step_s) <= 1e-6 * s.step_s, "predicted: the trace's step %.9g s, the model's %.9g s",
               t.step_s, s.step_s);
        EXPECT(recvs > 0 && t.flows_out == recvs && t.flows_in == recvs, "predicted: %d receives, %d/%d arrows", recvs,
               t.flows_out, t.flows_in);
        check_arrows("predicted", t);
        printf("predicted: %zu ranks' steps, %d receives with their arrows, step %.4g ms: as the model\n", dry.size(),
               recvs, 1e3 * t.step_s);
    }

    // a real run's: 4 ranks (dp 2 x pp 2), stage 3 with offload to the disk, its second step as it ran
    for (std::string real : {std::string("-z 3 --pp 2 -d 256 --offload_optimizer cpu"),
                             std::string("-z 2 -d 256 --offload_optimizer nvme --nvme_tile_kib 4 --nvme_path ") + dir +
                                 "/disk"}) {
        TrainerRun run = base;
        run.model = TINY_4_LAYERS, run.train = dir + "/train.bin", run.ranks = 4, run.micro_batch = 2;
        run.seq_len = 32, run.steps = 3, run.checkpoint_every = -1;
        run.extra = real + " --trace " + dir + "/measured.json";
        run.run();
        TrainOptions o = options_from_flags("-e " + std::string(TINY_4_LAYERS) + " -b 2 -t 32 --ranks 4 " + real);
        const RunSetup setup = make_run_setup(o);
        std::vector<int> all = {0, 1, 2, 3};
        const std::vector<RecordedRank> dry = dry_run(o, setup, all);
        const Read t = read_trace(dir + "/measured.json");
        for (const RecordedRank& d : dry) check_rank(("measured, " + real).c_str(), t, d.rank, d.ops, true);
        EXPECT(t.ranks.size() == 4 && t.step_s > 0, "measured: %zu tracks, step %g s", t.ranks.size(), t.step_s);
        EXPECT(real.find("--pp") == std::string::npos || (t.flows_in > 0 && t.flows_in == t.flows_out),
               "measured: %d/%d arrows", t.flows_out, t.flows_in);
        check_arrows("measured", t);
        printf("measured, %s: 4 ranks' steps, every op once, each after what it waits for\n", real.c_str());
    }

    // a dry run's trace needs the profile's times
    expect_one_line_error(base, "-e " + std::string(TINY) + " -t 32 --dry_run 1 --trace " + dir + "/x.json", 1,
                          "--trace of a dry run needs --predict PROFILE");
    return test_summary("trace");
}

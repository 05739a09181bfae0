// The dry run (zero/run/dry_run.h) is the real run with nothing computed: for
// runs across the stages, world sizes, tensor and sequence parallelism,
// offload of every kind (NVMe too), the delayed update, recomputation, Pa and
// pipeline stages, every rank's dry run (in this process) must equal the
// trainer's own run of the same flags (--mem_report 1 --trace FILE -o DIR):
//   * its recorded operations -- the step-time model's input -- against the
//     trainer's first steady step as it ran (--trace: every rank's ops as it
//     recorded them, zero/run/step_trace.h), op by op: kind, name, lane,
//     group, bytes, shape, peer, unit and the ops each waits for. An op only
//     one of them records, or records otherwise, fails here;
//   * its memory after forward, after backward and after the step, kind by
//     kind and arena by arena, its peak and its reserved bytes, to the byte
//     (mem_report_rank<r>.csv).
// The dry run builds its options as the trainer does (parse_flags,
// resolve_batch, make_run_setup). The test runs in checking mode, so every
// dry run's list is also replayed with its own edges only (check_op_order,
// zero/base/ops.h): each collective must wait for the compute that writes its
// bytes, each upload for the host work that produced it.
//
// usage: test_perf_trace <train_gpt2_zero_cpu> [only the cases whose flags contain this]
#include <map>
#include <string>
#include <vector>

#include "test/trainer_run.h"
#include "zero/base/json.h"
#include "zero/run/dry_run.h"

namespace {

// Everything the step-time model reads of an op, as --trace writes it.
std::string describe(const std::string& name, const std::string& kind, const std::string& lane, const std::string& group,
                     uint64_t bytes, const std::string& shape, int peer, int unit, const std::vector<int>& after) {
    std::string d = name + " (" + kind + ") on the " + lane;
    if (!group.empty()) d += ", group " + group;
    d += ", " + std::to_string(bytes) + " bytes, shape " + shape + ", peer " + std::to_string(peer) + ", unit " +
         std::to_string(unit) + ", after";
    for (int a : after) d += " " + std::to_string(a);
    return d;
}

// A dry run's steady step (its second), numbered from 0, each op described.
std::vector<std::string> dry_step(const std::vector<StepOp>& ops) {
    int first = 0;
    while (first < (int)ops.size() && ops[first].step != 1) first++;
    std::vector<std::string> out;
    for (int i = first; i < (int)ops.size(); i++) {
        const StepOp& op = ops[i];
        std::vector<int> after;
        for (int a : op.after)
            if (a >= first) after.push_back(a - first);
        std::string shape = StepOp::op_key("", op.dims);
        out.push_back(describe(op.name, op_kind_name(op.kind), lane_name(op.lane), op.group, op.bytes,
                               shape.empty() ? shape : shape.substr(1), op.peer, op.unit, after));
    }
    return out;
}

// The traced step of every rank, as --trace wrote it: rank -> its ops, described.
std::map<int, std::vector<std::string>> traced_steps(const std::string& path) {
    std::map<int, std::map<int, std::string>> by_op;
    if (!file_exists(path)) return {};
    const JsonValue doc = parse_json_file(path);
    for (const JsonValue& e : doc.find("traceEvents")->as_array()) {
        if (e.find("ph")->as_string() != "X") continue;
        const JsonValue& a = *e.find("args");
        std::vector<int> after;
        for (const JsonValue& w : a.find("after")->as_array()) after.push_back((int)w.as_integer());
        by_op[(int)e.find("pid")->as_integer()][(int)a.find("op")->as_integer()] =
            describe(e.find("name")->as_string(), a.find("kind")->as_string(), a.find("lane")->as_string(),
                     a.find("group")->as_string(), (uint64_t)a.find("bytes")->as_integer(),
                     a.find("shape")->as_string(), (int)a.find("peer")->as_integer(),
                     (int)a.find("unit")->as_integer(), after);
    }
    std::map<int, std::vector<std::string>> out;
    for (auto& [rank, ops] : by_op)
        for (auto& [i, d] : ops) out[rank].push_back(d);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "perf_trace";
    run_command("rm -rf " + dir + " && mkdir -p " + dir + "/disk");
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);
    struct Case {
        int ranks;
        std::string flags;
        int delay = 0;  // --offload_delay_steps
    } cases[] = {
        {1, "-z 0"},
        {2, "-z 0 -d 384"},
        {2, "-z 1 -d 384"},
        {4, "-z 1 --offload_optimizer cpu"},
        {2, "-z 2 -d 384 -r 1"},
        {2, "-z 2 -d 384 --offload_optimizer cpu"},
        {2, "-z 2 -d 384 --offload_optimizer cpu --offload_grad_accum device"},
        {4, "-z 3"},
        {2, "-z 3 -d 384 -r 2 --offload_optimizer cpu --offload_param cpu --offload_activations 1"},
        {2, "-z 3 --tp 2 -r 2"},
        {2, "-z 3 --tp 2 -r 2 --partition_activations 0"},
        {4, "-z 3 --tp 2 --sp 1 -d 256"},
        {4, "-z 2 --tp 2 -r 2 --offload_activations 1 --offload_optimizer cpu"},
        {4, "-z 1 --tp 4"},
        {2, "-z 0 --tp 2 --sp 1 -r 1"},
        {2, "-z 0 --pp 2 -d 256"},
        {4, "-z 1 --pp 4 -d 512 --pp_schedule gpipe"},
        {4, "-z 2 --pp 2 --tp 2 -d 256 --offload_optimizer cpu"},
        {4, "-z 3 --pp 2 -d 512 -r 2"},
        {4, "-z 3 --pp 2 --tp 2 --sp 1 -d 256 --offload_optimizer cpu --offload_param cpu"},
        {2, "-z 1 --offload_optimizer cpu", 1},
        {2, "-z 2 -d 384 --offload_optimizer cpu --offload_grad_accum device", 2},
        {2, "-z 3 -d 384 --offload_optimizer cpu", 1},
        {2, "-z 2 -p bf16 -d 384 --offload_optimizer cpu --pp 2", 1},
        // NVMe offload: tiles small enough that a step cycles the ring several times; the delayed update
        {2, "-z 2 -d 384 --offload_optimizer nvme --nvme_path perf_trace/disk --nvme_tile_kib 4 --nvme_buffers 2"},
        {2, "-z 1 --offload_optimizer nvme --nvme_path perf_trace/disk --nvme_tile_kib 4 --nvme_fraction 0.5", 1},
        {4, "-z 3 --tp 2 -d 256 --offload_optimizer nvme --nvme_path perf_trace/disk --nvme_tile_kib 8"},
    };
    const std::string only = argc > 2 ? argv[2] : "";
    int compared = 0, chosen = 0;
    for (const Case& c : cases) {
        if (c.flags.find(only) == std::string::npos) continue;
        chosen++;
        TrainerRun run = base;
        run.model = TINY_4_LAYERS, run.train = dir + "/train.bin", run.ranks = c.ranks;
        const int steps = c.delay ? c.delay + 2 : 2;
        const std::string delay = c.delay ? " --offload_delay_steps " + std::to_string(c.delay) : "";
        run.micro_batch = 2, run.seq_len = 32, run.steps = steps, run.mem_report = true;
        run.out = dir + "/run" + std::to_string(compared);
        run.extra = c.flags + delay + " -n -1 --trace " + run.out + "/trace.json";
        RunResult r = run.run();
        EXPECT(r.status == 0, "%s: the run failed: %s", c.flags.c_str(), r.output.c_str());
        if (r.status != 0) continue;
        const std::string flags = "-e " + std::string(TINY_4_LAYERS) + " -b 2 -t 32 --ranks " + std::to_string(c.ranks) +
                                  " " + c.flags + delay;
        TrainOptions o = options_from_flags(flags);
        RunSetup setup = make_run_setup(o);
        std::vector<int> all;
        for (int rank = 0; rank < c.ranks; rank++) all.push_back(rank);
        std::vector<RecordedRank> dry = dry_run(o, setup, all);
        const std::map<int, std::vector<std::string>> traced = traced_steps(run.out + "/trace.json");
        size_t ops = 0;
        for (const RecordedRank& d : dry) {
            // the operations, as the trainer ran its step and as dry-run
            const std::vector<std::string> want = dry_step(d.ops);
            const std::vector<std::string> got = traced.count(d.rank) ? traced.at(d.rank) : std::vector<std::string>{};
            size_t same = 0;
            while (same < got.size() && same < want.size() && got[same] == want[same]) same++;
            EXPECT(got.size() > 4 && got.size() == want.size() && same == got.size(),
                   "%s, rank %d: %zu ops run, %zu in the dry run; first difference at op %zu: run '%s', dry '%s'",
                   flags.c_str(), d.rank, got.size(), want.size(), same, same < got.size() ? got[same].c_str() : "(none)",
                   same < want.size() ? want[same].c_str() : "(none)");
            if (same < got.size() || same < want.size())  // the ops before the difference, as context
                for (size_t i = same >= 6 ? same - 6 : 0; i < same; i++) fprintf(stderr, "    op %zu: %s\n", i, got[i].c_str());
            ops += got.size();
            // memory, phase by phase, kind by kind
            CsvRows m = r.mem_report(d.rank);
            int rows = 0;
            for (size_t i = 0; i < m.rows.size(); i++) {
                if (m.num(i, "step") != steps) continue;
                const std::string phase = m.text(i, "phase");
                int a = 0;
                while (a < NUM_ARENAS && m.text(i, "arena") != arena_name((Arena)a)) a++;
                EXPECT(a < NUM_ARENAS, "%s: arena %s", flags.c_str(), m.text(i, "arena").c_str());
                if (a == NUM_ARENAS) continue;
                const Arena arena = (Arena)a;
                const MemCounts& live = phase == "forward" ? d.live.forward : phase == "backward" ? d.live.backward : d.live.step;
                for (int k = 0; k < NUM_MEM_KINDS; k++)
                    EXPECT((size_t)m.num(i, mem_kind_name((MemKind)k)) == live.get(arena, (MemKind)k),
                           "%s, rank %d, after %s, %s %s: the run %.0f bytes, the dry run %zu", flags.c_str(), d.rank,
                           phase.c_str(), arena_name(arena), mem_kind_name((MemKind)k),
                           m.num(i, mem_kind_name((MemKind)k)), live.get(arena, (MemKind)k));
                EXPECT((size_t)m.num(i, "peak") == d.peak[(int)arena] && (size_t)m.num(i, "reserved") == d.reserved.total(arena),
                       "%s, rank %d, %s: peak %.0f / %zu, reserved %.0f / %zu", flags.c_str(), d.rank, arena_name(arena),
                       m.num(i, "peak"), d.peak[(int)arena], m.num(i, "reserved"), d.reserved.total(arena));
                rows++;
            }
            EXPECT(rows >= 3, "%s, rank %d: %d memory rows of the last step", flags.c_str(), d.rank, rows);
        }
        printf("%-100s %zu ops of a step over the ranks: as the dry run's\n", flags.c_str(), ops);
        compared++;
    }
    EXPECT(compared == chosen && chosen > 0, "%d of the %d runs compared", compared, chosen);
    return test_summary("perf_trace");
}

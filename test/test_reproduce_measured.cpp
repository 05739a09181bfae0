// The reproduction's measured part (build/reproduce --parts memory,homework) on
// a tiny model, against formulas computed here:
//   * memory_vs_n.csv: every (stage, N) ran; after forward, backward and step the
//     measured live bytes equal the predictor's exactly, the peak is within the
//     predicted reserved bytes, the after-step bytes are exactly the model
//     states a step leaves (s Psi of parameters, or s Psi / N at stage 3, plus
//     12 Psi of optimizer state, / N from stage 1), and the paper's column is
//     (s + s + K) Psi partitioned as the paper says;
//   * comm_vs_n.csv: bytes sent per rank per step equal 2 Psi (N-1)/N s (stages
//     0-2) and 3 Psi (N-1)/N s (stage 3) exactly, split as each stage's
//     collectives should be (all-reduce; reduce-scatter + all-gather; two gathers);
//   * homework.csv: all six DeepSpeed files ran, in the precision they ask for,
//     offload moving memory to the host; report.md names the accepted keys that
//     change nothing, with a reason each, and shows every PNG.
//
// usage: test_reproduce_measured <build/reproduce> <train_gpt2_zero_cpu> <dev/homework>
#include <cstdio>
#include <string>

#include "test/model_shapes.h"
#include "test/test_util.h"
#include "test/trainer_harness.h"
#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"
#include "zero/reproduce/run_command.h"

int main(int argc, char** argv) {
    std::vector<std::string> args =
        test_args(argc, argv, "<build/reproduce> <train_gpt2_zero_cpu> <dev/homework>");
    const std::string dir = "reproduce_measured", out = dir + "/out";
    run_command("rm -rf " + dir + " && mkdir -p " + dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);
    const int T = 64;  // B T a multiple of 64: every buffer a whole number of the allocator's 256-byte blocks
    std::string cmd = args[0] + " --trainer " + args[1] + " --parts memory,homework --out " + out + " --model " + TINY_T64 +
                      " -t " + std::to_string(T) + " --homework_t " + std::to_string(T) +
                      " --ranks 1,2,4 --homework_steps 2 --homework_dir " + args[2] + " --trainer_flags '-i " + dir +
                      "/train.bin'";
    CommandResult r = run_command(cmd);
    EXPECT(r.status == 0, "`%s` exited %d:\n%s", cmd.c_str(), r.status, r.output.c_str());
    EXPECT(r.output.find("[12/12] memory and traffic: stage 3, 4 rank(s)") != std::string::npos &&
               r.output.find("[6/6] homework: stage 3 + fp16") != std::string::npos,
           "no progress line per run:\n%s", r.output.c_str());

    // the runs write reports, not checkpoints (-n -1)
    CommandResult ckpt = run_command("ls -d " + out + "/runs/*/checkpoint_* 2>/dev/null | wc -l");
    EXPECT(atoi(ckpt.output.c_str()) == 0, "the runs wrote %s checkpoint(s)", ckpt.output.c_str());

    ParamLayout layout(gpt2_config_from_descriptor(TINY_T64));
    const double s = 4, psi = (double)layout.num_parameters();

    // ---- memory
    CsvTable mem = read_csv_table(out + "/memory_vs_n.csv");
    EXPECT(mem.rows.size() == 4 * 3 * 4, "memory_vs_n.csv: %zu rows", mem.rows.size());
    for (size_t i = 0; i < mem.rows.size(); i++) {
        int z = (int)mem.num(i, "stage"), N = (int)mem.num(i, "ranks");
        const std::string& phase = mem.text(i, "phase");
        double got = mem.num(i, "measured_bytes"), pred = mem.num(i, "predicted_bytes");
        EXPECT(mem.text(i, "status") == "measured", "stage %d N %d: %s", z, N, mem.text(i, "status").c_str());
        if (phase == "peak") EXPECT(got > 0 && got <= pred, "stage %d N %d: peak %.0f, reserved %.0f", z, N, got, pred);
        else EXPECT(got == pred, "stage %d N %d after %s: measured %.0f, predicted %.0f", z, N, phase.c_str(), got, pred);
        ShardPlan plan(layout.unit_specs(), N, SHARD_ALIGN);
        double pp = (double)plan.full_numel;
        if (phase == "step") {
            double states = (z < 3 ? s * pp : s * pp / N) + (z == 0 ? 12 * pp : 12 * pp / N);
            EXPECT(got == states, "stage %d N %d after the step: %.0f bytes, parameters + optimizer %.0f", z, N, got,
                   states);
        }
        double paper = z == 0 ? (s + s + 12) * psi : z == 1 ? 2 * s * psi + 12 * psi / N
                                                 : z == 2 ? s * psi + (s + 12) * psi / N : (s + s + 12) * psi / N;
        EXPECT(std::fabs(mem.num(i, "paper_model_states_bytes") - paper) <= 1, "stage %d N %d: paper %.0f, want %.0f",
               z, N, mem.num(i, "paper_model_states_bytes"), paper);
    }

    // ---- communication
    CsvTable comm = read_csv_table(out + "/comm_vs_n.csv");
    EXPECT(comm.rows.size() == 4 * 3, "comm_vs_n.csv: %zu rows", comm.rows.size());
    for (size_t i = 0; i < comm.rows.size(); i++) {
        int z = (int)comm.num(i, "stage"), N = (int)comm.num(i, "ranks");
        ShardPlan plan(layout.unit_specs(), N, SHARD_ALIGN);
        double one = (double)plan.full_numel * (N - 1) / N * s;  // Psi (N-1)/N elements, in bytes
        double ar = comm.num(i, "all_reduce_bytes"), rs = comm.num(i, "reduce_scatter_bytes"),
               ag = comm.num(i, "all_gather_bytes"), total = comm.num(i, "total_sent_bytes");
        double want = (z < 3 ? 2 : 3) * one;
        EXPECT(total == want && comm.num(i, "formula_bytes") == want, "stage %d N %d: sent %.0f, formula %.0f", z, N,
               total, want);
        if (z == 0) EXPECT(ar == 2 * one && rs == 0 && ag == 0, "stage 0 N %d: %.0f %.0f %.0f", N, ar, rs, ag);
        else if (z < 3) EXPECT(ar == 0 && rs == one && ag == one, "stage %d N %d: %.0f %.0f %.0f", z, N, ar, rs, ag);
        else EXPECT(ar == 0 && rs == one && ag == 2 * one, "stage 3 N %d: %.0f %.0f %.0f", N, ar, rs, ag);
    }

    // ---- the homework
    CsvTable hw = read_csv_table(out + "/homework.csv");
    EXPECT(hw.rows.size() == 6, "homework.csv: %zu rows", hw.rows.size());
    for (size_t i = 0; i < hw.rows.size(); i++) {
        const std::string& name = hw.text(i, "config");
        bool offload = name.find("offload") != std::string::npos, fp16 = name.find("fp16") != std::string::npos;
        EXPECT(hw.text(i, "status") == "measured", "%s: %s", name.c_str(), hw.text(i, "status").c_str());
        EXPECT(hw.text(i, "precision") == (fp16 ? "fp16" : "fp32"), "%s ran in %s", name.c_str(),
               hw.text(i, "precision").c_str());
        EXPECT((hw.num(i, "host_mib") > 0) == offload, "%s: %.2f MiB on the host", name.c_str(), hw.num(i, "host_mib"));
        EXPECT(hw.num(i, "after_forward_mib") > hw.num(i, "after_step_mib") && hw.num(i, "seconds_per_20_iterations") > 0,
               "%s: fwd %.2f step %.2f MiB, %.2f s", name.c_str(), hw.num(i, "after_forward_mib"),
               hw.num(i, "after_step_mib"), hw.num(i, "seconds_per_20_iterations"));
    }
    if (hw.rows.size() == 6) {  // stage 3 keeps less after the step than stage 1, offload less still
        EXPECT(hw.num(3, "after_step_mib") < hw.num(0, "after_step_mib") &&
                   hw.num(4, "after_step_mib") < hw.num(3, "after_step_mib"),
               "after the step: stage 1 %.2f, stage 3 %.2f, stage 3 + offload %.2f MiB", hw.num(0, "after_step_mib"),
               hw.num(3, "after_step_mib"), hw.num(4, "after_step_mib"));
    }
    std::string report = read_text_file(out + "/report.md");
    for (const char* key : {"allgather_bucket_size", "reduce_bucket_size", "overlap_comm", "sub_group_size"}) {
        size_t at = report.find(std::string(key) + "`: no effect here: ");
        EXPECT(at != std::string::npos, "report.md gives no reason for %s", key);
    }
    for (const char* png : {"memory_vs_n.png", "comm_vs_n.png", "homework.png"}) {
        EXPECT(report.find(std::string("(") + png + ")") != std::string::npos, "report.md does not show %s", png);
        if (png_available()) EXPECT(file_exists(out + "/" + png), "%s was not written", png);
    }
    return test_summary("reproduce_measured");
}

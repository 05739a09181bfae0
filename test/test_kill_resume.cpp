// Nothing lost, nothing mixed, under kill -9:
//   * stdout redirected to a file is line-buffered: a killed run loses no line;
//   * a short emulated run (2 ranks, stage 2, a checkpoint every step) is
//     killed with SIGKILL at random moments — during steps, saves and renames
//     alike — and resumed with -y 1 each time; the final parameters, optimizer
//     shards and main.log equal the uninterrupted run's bit for bit;
//   * a directory holding another run's checkpoints: a fresh run into it is
//     refused and leaves it as it was; with --overwrite 1 the new run, killed
//     while it writes, resumes only its own checkpoints and ends bit-identical
//     to its uninterrupted twin, never with the older run's state;
//   * the same kills with the optimizer states on disk (--offload_optimizer
//     nvme): its files are scratch, rebuilt from the checkpoint on resume, and
//     the run ends bit-identical to the uninterrupted run without offload.
// The kill moments are drawn from a seed printed first (KILL_SEED=<n> draws the same).
//
// usage: test_kill_resume <path to train_gpt2_zero_cpu>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "test/child_process.h"
#include "test/trainer_run.h"

// How many step lines ("step n/N | ...") the log holds so far.
static int step_lines(const std::string& log) {
    FILE* f = fopen(log.c_str(), "r");
    if (!f) return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f)) n += strncmp(line, "step ", 5) == 0 && strchr(line, '|') != nullptr;
    fclose(f);
    return n;
}

// Starts `command` (its output appended to log) and kills it with SIGKILL
// `delay_ms` after its log has gained `steps` more step lines, unless it ended
// first (or after give_up_s, whatever it is doing); true if it was killed. Counting
// steps rather than seconds puts the kills into training on any machine's
// speed; the delay puts them anywhere in a step or its save.
static bool run_and_kill(const std::string& command, const std::string& log, int steps, int delay_ms,
                         int give_up_s = 60) {
    const int before = step_lines(log);
    Child c = start_child([&] {
        execl("/bin/sh", "sh", "-c", ("exec " + command + " >>" + log + " 2>&1").c_str(), (char*)nullptr);
        return 127;
    });
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(give_up_s);
    int wstatus = 0;
    while (step_lines(log) < before + steps && std::chrono::steady_clock::now() < give_up) {
        if (waitpid(c.pid, &wstatus, WNOHANG) == c.pid) {
            close(c.err_fd);
            return false;  // it finished before its kill
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(c.pid, SIGKILL);
    wait_child(c);
    return true;
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "killed_runs";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 30000, 11);
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.micro_batch = 4;
    base.ranks = 2;
    base.stage = 2;
    base.steps = 30;
    base.checkpoint_every = 1;
    base.extra = "-l 2e-3 -u 2 -c 0.1";

    const char* env_seed = getenv("KILL_SEED");
    uint64_t seed = env_seed ? strtoull(env_seed, nullptr, 10)
                             : (uint64_t)std::chrono::system_clock::now().time_since_epoch().count() % 1000000;
    printf("kill times from KILL_SEED=%llu\n", (unsigned long long)seed);
    Rng rng(seed);

    // the uninterrupted run, and how long it takes
    TrainerRun straight = base;
    straight.out = dir + "/straight";
    straight.run();

    // Kills a run of `run` into run.out `kills` times at random moments, resuming
    // each time, then lets it finish; true if the final files equal `reference`'s.
    auto killed_and_resumed = [&](TrainerRun run, int kills, const std::string& reference, const char* what,
                                  const std::string& resume_extra) {
        const std::string log = run.out + ".log";
        int killed = 0;
        for (int k = 0; k < kills; k++) {
            int steps = 1 + (int)(rng.next_u32() % 6), delay_ms = (int)(rng.next_u32() % 25);
            bool was_killed = run_and_kill(run.command(), log, steps, delay_ms);
            printf("%s: attempt %d %s %d ms after %d step line(s)\n", what, k + 1,
                   was_killed ? "killed" : "finished before its kill", delay_ms, steps);
            killed += was_killed;
            run.resume = true;
            run.extra = resume_extra;  // a resume drops --overwrite: the checkpoints are its own now
        }
        RunResult last = run.run();
        EXPECT(killed > 0, "%s: no attempt was killed", what);
        bool same_model = files_identical(checkpoint_model(run.out, 30), checkpoint_model(reference, 30));
        bool same_optim = true;
        for (int r = 0; r < 2; r++)
            same_optim &= files_identical(optim_file(checkpoint_dir(run.out, 30), r),
                                          optim_file(checkpoint_dir(reference, 30), r));
        EXPECT(same_model && same_optim, "%s: after %d kills the final state differs from the uninterrupted run's "
               "(model %s, optimizer %s); its log: %s", what, killed, same_model ? "same" : "differs",
               same_optim ? "same" : "differ", log.c_str());
        std::vector<double> a = read_main_log(run.out + "/main.log", "trl"), b = read_main_log(reference + "/main.log", "trl");
        EXPECT(a == b, "%s: main.log holds %zu losses, the uninterrupted run's %zu (or other values)", what, a.size(),
               b.size());
        return last;
    };

    // 0. stdout into a file is line-buffered: a killed run has printed every
    // step it finished (block-buffered, the first 4 KiB would never arrive)
    TrainerRun endless = base;
    endless.steps = 100000;
    endless.checkpoint_every.reset();
    const std::string endless_log = dir + "/endless.log";
    run_and_kill(endless.command(), endless_log, 2, 0, 20);
    std::string text;
    if (FILE* f = fopen(endless_log.c_str(), "rb")) {
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
        fclose(f);
    }
    // block-buffered output reaches the file in 4 KiB pieces that end mid-line
    EXPECT(step_lines(endless_log) >= 2 && !text.empty() && text.back() == '\n',
           "a run killed after its second step left %d step lines in its redirected stdout, %s", step_lines(endless_log),
           text.empty() || text.back() == '\n' ? "ending in a whole line" : "ending in half a line");

    // 1. kill -9 at random moments, resume, bit-identical
    TrainerRun killed = base;
    killed.out = dir + "/killed";
    killed_and_resumed(killed, 4, straight.out, "kill/resume", base.extra);

    // 2. a directory holding another run's checkpoints
    TrainerRun older = base;  // another run (another seed), 3 steps
    older.out = dir + "/rewrite";
    older.steps = 3;
    older.extra += " --seed 99";
    older.run();
    TrainerRun newer = base;  // this test's run, into the same directory
    newer.out = older.out;
    RunResult refused = newer.try_run();
    EXPECT(refused.status == 1 && refused.output.find("already holds checkpoints") != std::string::npos,
           "a fresh run into a directory of another run's checkpoints was not refused:\n%s", refused.output.c_str());
    CheckpointManifest m;
    std::string why;
    const std::vector<int> older_steps = {3, 2, 1};
    EXPECT(checkpoint_steps(older.out) == older_steps &&
               verify_checkpoint(checkpoint_dir(older.out, 3), 3, m, why) && m.id.seed == 99,
           "the refused run changed the older run's checkpoints: %s", why.c_str());
    newer.extra += " --overwrite 1";
    killed_and_resumed(newer, 2, straight.out, "overwrite, killed, resumed", base.extra);

    // 3. the optimizer states on disk, in tiles of 1024 elements: killed mid-write of its files too
    TrainerRun on_disk = base;
    on_disk.out = dir + "/nvme";
    fresh_dir(dir + "/nvme_states");
    on_disk.extra += " --offload_optimizer nvme --nvme_path " + dir + "/nvme_states --nvme_tile_kib 4 --nvme_buffers 2";
    killed_and_resumed(on_disk, 3, straight.out, "nvme: killed, resumed", on_disk.extra);
    return test_summary("kill_resume");
}

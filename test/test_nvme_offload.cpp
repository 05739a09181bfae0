// NVMe offload (--offload_optimizer nvme) through the trainer, against CPU
// offload, on the CPU build with the states' files in a directory of the test's:
//   * exact: after 6 steps the parameters, every rank's optimizer shard (the
//     checkpoint's master, m, v) and every loss equal --offload_optimizer cpu's
//     bit for bit, at stages 1-3 in fp32 and bf16, with the delayed update,
//     with the gradient shard on the device, with parameter offload, with
//     tensor and with pipeline parallelism, with a share of the states kept in
//     host memory, and over ring sizes of 1 to 3 tiles of 1024 elements (every
//     unit many tiles, tiles read ahead and written behind); with data and
//     tensor degrees unequal (8 ranks at tp 2, 6 at tp 3) too, and continued
//     from a checkpoint with the states on disk;
//   * the files: one for each rank, named by the rank the launcher gave it and
//     holding that rank's states (a 6-rank run at tp 3, killed: its files
//     against its checkpoint);
//   * a checkpoint is the same whatever held the states: an nvme run resumes a
//     cpu run's checkpoint and a cpu run an nvme run's, bit-identical to the
//     run that was never stopped;
//   * the memory report counts the disk: the states' file in the disk arena,
//     the host keeping the rest and the ring;
//   * bad input and faults: one line and a nonzero exit -- no --nvme_path, a
//     missing directory, a regular file, --nvme_path without nvme, parameter
//     offload to nvme, a fraction out of range, a disk too small for the run
//     (a file-size limit in the child), two runs on one directory at once.
//
//   * DeepSpeed's homework config with its offload_optimizer's device "nvme"
//     (and an nvme_path) trains as the same config with "cpu" does.
//
// usage: test_nvme_offload <path to train_gpt2_zero_cpu> <dev/homework/stage3_offload.json>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "test/child_process.h"
#include "test/optim_file_util.h"
#include "test/trainer_run.h"
#include "zero/engine/disk_states.h"
#include "zero/engine/memory_predictor.h"

static std::string read_text(const std::string& path) {
    std::string all;
    if (FILE* f = fopen(path.c_str(), "rb")) {
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof(buf), f)) > 0) all.append(buf, got);
        fclose(f);
    }
    return all;
}

int main(int argc, char** argv) {
    const std::vector<std::string> args = test_args(argc, argv, "<train_gpt2_zero_cpu> <a DeepSpeed config with cpu offload>");
    TrainerRun base(args[0]);
    const std::string dir = "nvme_offload";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 30000, 17);
    const int steps = 6;
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.total_batch = 8 * 32;
    base.steps = steps;
    base.checkpoint_every = steps;
    base.ranks = 2;
    base.micro_batch = 4;
    base.extra = "-l 3e-3 -u 2 -q 0.1 -c 0.1";
    const std::string states = dir + "/states";
    fresh_dir(states);
    const std::string nvme = " --offload_optimizer nvme --nvme_path " + states + " --nvme_tile_kib 4";

    // the run with the states in host memory, then on disk with `disk` flags: equal in every byte
    auto same_as_cpu = [&](const std::string& name, TrainerRun run, const std::string& disk) {
        TrainerRun cpu = run, ssd = run;
        cpu.out = dir + "/" + name + "_cpu";
        cpu.offload_optimizer = true;
        ssd.out = dir + "/" + name + "_nvme";
        ssd.extra += nvme + disk;
        RunResult a = cpu.run(), b = ssd.run();
        const int world = run.ranks.value_or(1), n = run.steps.value_or(steps);
        bool optim = true;
        for (int r = 0; r < world; r++)
            optim &= files_identical(optim_file(checkpoint_dir(a.out, n), r), optim_file(checkpoint_dir(b.out, n), r));
        EXPECT(files_identical(a.model_at(n), b.model_at(n)) && optim && a.train_losses == b.train_losses &&
                   a.train_losses.size() == (size_t)n,
               "%s: the states on disk (%s) change the run: parameters %s, optimizer shards %s, losses %s", name.c_str(),
               disk.c_str(), files_identical(a.model_at(n), b.model_at(n)) ? "same" : "differ",
               optim ? "same" : "differ", a.train_losses == b.train_losses ? "same" : "differ");
        return std::make_pair(a, b);
    };

    // --- exact, stage by stage, in both precisions
    for (const char* precision : {"fp32", "bf16"})
        for (int z = 1; z <= 3; z++) {
            TrainerRun run = base;
            run.precision = precision;
            run.stage = z;
            same_as_cpu("z" + std::to_string(z) + precision, run, " --nvme_buffers " + std::to_string(z));
        }
    // --- exact beside the other offload modes and parallelisms
    {
        TrainerRun run = base;
        run.precision = "bf16";
        run.stage = 2;
        run.extra += " --offload_delay_steps 2";
        same_as_cpu("delayed", run, " --nvme_buffers 2 --nvme_threads 2 --nvme_queue_depth 2");
    }
    {
        TrainerRun run = base;
        run.stage = 3;
        run.micro_batch = 2;  // two micro-steps
        run.offload_grad_accum = "device";
        same_as_cpu("device_sums", run, " --nvme_buffers 3 --nvme_block_kib 4");
    }
    {
        TrainerRun run = base;
        run.stage = 3;
        run.offload_param = true;
        same_as_cpu("param_offload", run, " --nvme_fraction 0.5");
    }
    {
        TrainerRun run = base;
        run.ranks = 4;
        run.stage = 2;
        run.extra += " --tp 2";
        same_as_cpu("tp2", run, " --nvme_buffers 2");
    }
    {
        TrainerRun run = base;
        run.ranks = 4;
        run.stage = 1;
        run.micro_batch = 2;
        run.extra += " --pp 2";
        same_as_cpu("pp2", run, " --nvme_buffers 2 --nvme_fraction 0.6");
    }

    // --- data and tensor degrees unequal, where a rank numbered the wrong way round would take
    // another rank's file name (or two ranks one): 8 ranks at tp 2 (4 data ranks), 6 at tp 3 (2 data
    // ranks; 3 heads and a vocabulary of 384, which 3 divides). 4 steps, a checkpoint every 2, and
    // the nvme run continued on disk from its step 2, all equal to the cpu run's
    write_markov_shard(dir + "/train384.bin", 384, 30000, 19);
    const char* const tp3_model = "L=2,H=3,C=48,V=384,T=32";
    for (int t : {2, 3}) {
        const int d = t == 2 ? 4 : 2;
        TrainerRun run = base;
        run.ranks = d * t;
        run.micro_batch = 8 / d;
        run.stage = t == 2 ? 2 : 3;
        run.steps = 4;
        run.checkpoint_every = 2;
        run.extra += " --tp " + std::to_string(t);
        if (t == 3) run.model = tp3_model, run.train = dir + "/train384.bin";
        const std::string name = "tp" + std::to_string(t) + "_dp" + std::to_string(d);
        const auto runs = same_as_cpu(name, run, " --nvme_buffers 2");
        TrainerRun again = run;  // in a copy of the nvme run's directory as it was at step 2
        again.out = dir + "/" + name + "_resumed";
        run_command("rm -rf " + again.out + " && cp -r " + runs.second.out + " " + again.out + " && rm -rf " +
                    checkpoint_dir(again.out, 4));
        again.extra += nvme + " --nvme_buffers 2";
        again.resume = true;
        const RunResult resumed = again.run();
        const std::string from = strf("resumed from %s (step 2)", checkpoint_dir(again.out, 2).c_str());
        bool optim = true;
        for (int r = 0; r < d * t; r++)
            optim &= files_identical(optim_file(checkpoint_dir(resumed.out, 4), r),
                                     optim_file(checkpoint_dir(runs.first.out, 4), r));
        EXPECT(resumed.output.find(from) != std::string::npos && optim &&
                   files_identical(resumed.model_at(4), runs.first.model_at(4)) &&
                   resumed.train_losses == runs.first.train_losses,
               "%s: resumed from step 2 with the states on disk, the run differs from the cpu run (optimizer shards %s)",
               again.command().c_str(), optim ? "same" : "differ");
    }

    // --- the memory report: the states' file on disk, the host's share and the ring, every
    // row as the predictor says to the byte; the disk holds the last units' 12 bytes an
    // element (each tile's state rounded up to 4 KiB), the host the first units'
    {
        TrainerRun run = base;
        run.stage = 2;
        run.mem_report = true;
        run.out = dir + "/report";
        run.extra += nvme + " --nvme_fraction 0.5 --nvme_buffers 3";
        RunResult r = run.run();
        MemoryQuery q;
        q.cfg = gpt2_config_from_descriptor(TINY);
        q.stage = 2, q.world = 2, q.dtype_bytes = 4, q.micro_batch = 4, q.seq_len = 32;
        q.offload_optimizer = q.offload_nvme = true;
        q.nvme_fraction = 0.5, q.nvme_buffers = 3, q.nvme_tile_numel = 1024;
        const MemoryPrediction pred = predict_memory(q, SHARD_ALIGN);
        ShardPlan plan(ParamLayout(q.cfg).unit_specs(), 2, SHARD_ALIGN);
        const ShardPlan::DiskSplit split = plan.disk_split(0.5, 1024);
        const double on_disk = (double)(plan.shard_numel - split.begin), tiles = (double)split.tiles.size();
        const double disk = (double)pred.reserved.get(Arena::Disk, MemKind::Optimizer);
        EXPECT(split.begin > 0 && on_disk <= 0.5 * plan.shard_numel && disk >= 12 * on_disk &&
                   disk < 12 * on_disk + 3 * 4096 * tiles && tiles >= on_disk / 1024,
               "the disk's share: %.0f of %zu elements in %.0f tiles, %.0f bytes predicted", on_disk, plan.shard_numel,
               tiles, disk);
        for (int rank = 0; rank < 2; rank++) {
            CsvRows mem = r.mem_report(rank);
            int disk_rows = 0;
            for (size_t i = 0; i < mem.rows.size(); i++) {
                const std::string arena = mem.text(i, "arena");
                EXPECT(mem.num(i, "live_total") == mem.num(i, "predicted_total"),
                       "rank %d %s after %s: live %.0f bytes, predicted %.0f", rank, arena.c_str(),
                       mem.text(i, "phase").c_str(), mem.num(i, "live_total"), mem.num(i, "predicted_total"));
                if (arena == "disk") {
                    disk_rows++;
                    EXPECT(mem.num(i, "reserved") == disk, "rank %d: %.0f disk bytes, predicted %.0f", rank,
                           mem.num(i, "reserved"), disk);
                }
            }
            EXPECT(disk_rows > 0, "rank %d's memory report has no disk rows", rank);
        }
    }

    // --- checkpoints whatever held the states: stop at step 3, resume in the other home, finish
    {
        TrainerRun straight = base;
        straight.stage = 2;
        straight.out = dir + "/straight";
        straight.run();
        for (int to_disk = 0; to_disk < 2; to_disk++) {
            TrainerRun first = straight, second = straight;
            first.out = second.out = dir + (to_disk ? "/cpu_then_nvme" : "/nvme_then_cpu");
            first.steps = 3, first.checkpoint_every = 3;
            (to_disk ? first.offload_optimizer : second.offload_optimizer) = true;
            (to_disk ? second.extra : first.extra) += nvme;
            first.run();
            second.resume = true;
            second.run();
            EXPECT(files_identical(checkpoint_model(second.out, steps), checkpoint_model(straight.out, steps)) &&
                       files_identical(optim_file(checkpoint_dir(second.out, steps), 1),
                                       optim_file(checkpoint_dir(straight.out, steps), 1)),
                   "%s: resumed, the run differs from the one never stopped", first.out.c_str());
        }
    }

    // --- the homework's DeepSpeed config, its optimizer offloaded to nvme instead of cpu
    {
        std::string json = read_text(args[1]);
        const std::string cpu = "\"offload_optimizer\": {\"device\": \"cpu\"";
        const size_t at = json.find(cpu);
        EXPECT(at != std::string::npos, "%s has no offload_optimizer to cpu", args[1].c_str());
        if (at != std::string::npos) {
            json.replace(at, cpu.size(), "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"" + states + "\"");
            const std::string nvme_json = dir + "/stage3_nvme.json";
            FILE* f = fopen(nvme_json.c_str(), "wb");
            fwrite(json.data(), 1, json.size(), f);
            fclose(f);
            TrainerRun a(base.trainer), b(base.trainer);
            a.model = b.model = TINY;
            a.train = b.train = base.train;
            a.seq_len = b.seq_len = 32;
            a.ranks = b.ranks = 4;
            a.steps = b.steps = 3;
            a.checkpoint_every = b.checkpoint_every = 3;
            a.out = dir + "/homework_cpu", b.out = dir + "/homework_nvme";
            a.extra = "--deepspeed_config " + args[1], b.extra = "--deepspeed_config " + nvme_json;
            RunResult ra = a.run(), rb = b.run();
            EXPECT(rb.output.find("nvme") != std::string::npos && ra.train_losses == rb.train_losses &&
                       files_identical(ra.model_at(3), rb.model_at(3)),
                   "the homework config with its optimizer on nvme does not train as with cpu:\n%s", rb.output.c_str());
        }
    }

    // --- bad input and faults: one line, status 1
    TrainerRun bad = base;
    bad.out = dir + "/bad";
    bad.steps = 2;
    bad.checkpoint_every.reset();
    expect_one_line_error(bad, "--offload_optimizer nvme -z 2", 2, "--nvme_path");
    expect_one_line_error(bad, "--offload_optimizer nvme -z 2 --nvme_path " + dir + "/absent", 2, "absent");
    expect_one_line_error(bad, "--offload_optimizer nvme -z 2 --nvme_path " + dir + "/train.bin", 2, "directory");
    expect_one_line_error(bad, "--offload_optimizer cpu -z 2 --nvme_path " + states, 2, "--nvme_path");
    expect_one_line_error(bad, "--offload_optimizer nvme -z 3 --offload_param nvme --nvme_path " + states, 2,
                          "--offload_param");
    expect_one_line_error(bad, nvme + " -z 2 --nvme_fraction 0", 2, "--nvme_fraction");
    expect_one_line_error(bad, nvme + " -z 2 --nvme_tile_kib 6", 2, "--nvme_tile_kib");
    {  // a disk too small: the files cannot be made at start-up (a 64 KiB file-size limit)
        TrainerRun small = bad;
        small.stage = 2;
        small.extra += nvme;
        CommandResult r = run_command("ulimit -f 128 && exec " + small.command());
        EXPECT(r.status == 1 && r.output.find("needs") != std::string::npos && r.output.find("error:") != std::string::npos,
               "a disk too small for the states was not refused at start-up with the bytes it needs (status %d):\n%s",
               r.status, r.output.c_str());
    }
    // --- a running run's files: one for each rank, named by the rank the launcher gave it and holding
    // that rank's states; a second run on the directory at once is refused. The first: 6 ranks at tp 3
    // with -l 0, so that its masters never move (its step-1 checkpoint's are its files'), killed once
    // the second has been refused (a killed run leaves its files)
    {
        const std::string named = dir + "/named";
        fresh_dir(named);
        const std::string on_named = " --offload_optimizer nvme --nvme_path " + named + " --nvme_tile_kib 4";
        TrainerRun first = base, second = base;
        first.out = dir + "/first", second.out = dir + "/second";
        first.model = tp3_model, first.train = dir + "/train384.bin";
        first.ranks = 6, first.stage = 1, first.steps = 100000, first.checkpoint_every = 1;
        first.extra += " -l 0 --tp 3" + on_named;
        second.stage = 2, second.checkpoint_every.reset();
        second.extra += on_named;
        const std::string log = dir + "/first.log";
        Child c = start_child([&] {
            execl("/bin/sh", "sh", "-c", ("exec " + first.command() + " >" + log + " 2>&1").c_str(), (char*)nullptr);
            return 127;
        });
        for (int i = 0; i < 2000 && parse_step_lines(read_text(log)).size() < 2; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        RunResult r = second.try_run();
        kill(c.pid, SIGKILL);
        wait_child(c);
        EXPECT(r.status == 1 && r.output.find("another run") != std::string::npos,
               "a second run on the states' directory of a running one was not refused (status %d):\n%s", r.status,
               r.output.c_str());
        std::string want, got = run_command("ls " + named).output;  // (ls sorts the names)
        for (int rank = 0; rank < 6; rank++) want += disk_states_file("", rank).substr(1) + "\n";
        EXPECT(got == want, "%s: the states' files of 6 ranks are\n%sthe launcher's ranks name\n%s", named.c_str(),
               got.c_str(), want.c_str());
        const ParamLayout layout(gpt2_config_from_descriptor(tp3_model), 3);
        const ShardPlan plan(layout.unit_specs(), 2, SHARD_ALIGN);
        const ShardPlan::DiskSplit split = plan.disk_split(1.0, 1024);
        for (int dp = 0; dp < 2; dp++)
            for (int tp = 0; tp < 3; tp++) {
                const int rank = dp * 3 + tp;  // the launcher's order: data-major, tensor ranks adjacent
                std::vector<std::vector<float>> states(3, std::vector<float>(plan.shard_numel));
                float* arrays[3] = {states[0].data(), states[1].data(), states[2].data()};
                read_optim_files(checkpoint_dir(first.out, 1), layout, 6, 3, PipelinePlan{}, plan, 1, dp, tp, arrays);
                const std::string file = disk_states_file(named, rank), bytes = read_text(file);
                size_t differ = 0, compared = 0, pos = 0;  // the masters: each tile's first state
                for (const DiskTile& tile : split.tiles) {
                    for (size_t i = 0; i < tile.n; i++, compared++) {
                        float x = NAN;
                        if (pos + 4 * (i + 1) <= bytes.size()) memcpy(&x, bytes.data() + pos + 4 * i, 4);
                        differ += x != states[0][split.begin + tile.offset + i];
                    }
                    pos += 3 * DiskStates::state_bytes(tile.n);
                }
                EXPECT(compared > 0 && differ == 0,
                       "%s does not hold the states of rank %d (data rank %d, tensor rank %d): %zu of its %zu masters "
                       "differ from that rank's checkpoint",
                       file.c_str(), rank, dp, tp, differ, compared);
            }
    }
    return test_summary("nvme_offload");
}

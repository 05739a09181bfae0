// Offload and ZeRO-R on the CPU build ("device" and "host" are separate
// accounting arenas of the same RAM here):
//   * optimizer offload (stages 1-3) and parameter offload (stage 3), N = 1, 2, 4:
//     parameters after 10 steps are bit-identical to the run without offload —
//     the host path runs the same arithmetic (the vectorised CPU AdamW equals the
//     scalar twin bit for bit, see test_cpu_adamw) on the same values;
//   * the same under gradient accumulation (stages 2-3, N = 1, 2, 2 and 4
//     micro-steps), with the micro-steps added on the host (--offload_grad_accum
//     host) or on the device (device): losses and parameters bit-identical to
//     each other and to the run without offload, and the device one holds its
//     gradient shard on the device (both hold the LM head's wte gradient there,
//     which meets the encoder's once per step);
//   * recomputation -r 1 and -r 2, and -r 2 with the layer outputs on the host,
//     give bit-identical parameters to -r 0 (so identical gradients), with the
//     smaller activation footprint the predictor gives;
//   * with parameter offload the device holds no parameter slices, only the
//     units in flight;
//   * a run predicted not to fit is refused before allocating, with the numbers
//     and what would fit instead.
//
// usage: test_offload_recompute <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/trainer_run.h"
#include "zero/engine/memory_predictor.h"

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    std::string dir = "offload";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 40000, 9);
    const int steps = 10;
    // every run: 10 steps of a global batch of 8 sequences of 32, reports on
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.total_batch = 8 * 32;
    base.steps = steps;
    base.mem_report = true;
    base.extra = "-l 3e-3 -u 2 -q 0.1 -c 0.1";
    auto run_into = [&](const std::string& name, TrainerRun run) {  // output in offload/<name>
        run.out = dir + "/" + name;
        return run.run();
    };

    // --- offload versus none, every stage that allows it, N = 1, 2, 4
    for (const char* precision : {"fp32", "bf16"})
        for (int n : {1, 2, 4})
            for (int z = 1; z <= 3; z++) {
                std::string name = "z" + std::to_string(z) + "n" + std::to_string(n) + precision;
                TrainerRun run = base;
                run.precision = precision;
                run.stage = z;
                run.ranks = n;
                run.micro_batch = 8 / n;
                std::string plain = run_into(name, run).model_at(steps);
                run.offload_optimizer = true;
                std::string opt = run_into(name + "_oo", run).model_at(steps);
                EXPECT(files_identical(plain, opt), "%s: optimizer offload changes the parameters (%.3g)",
                       name.c_str(), relative_error(read_model_params(opt), read_model_params(plain)));
                if (z == 3) {
                    run.offload_param = true;
                    RunResult par = run_into(name + "_op", run);
                    EXPECT(files_identical(plain, par.model_at(steps)), "%s: parameter offload changes the parameters",
                           name.c_str());
                    // the device holds parameters only while a unit is gathered
                    CsvRows mem = par.mem_report(0);
                    ParamLayout layout(gpt2_config_from_descriptor(TINY));
                    ShardPlan plan(layout.unit_specs(), n, SHARD_ALIGN);
                    double s = std::string(precision) == "fp32" ? 4 : 2;
                    double in_flight = (plan.padded[0] + 2.0 * plan.padded[1]) * s;  // the three unit slots
                    for (size_t i = 0; i < mem.rows.size(); i++)
                        if (mem.text(i, "arena") == "device") {
                            double p = mem.num(i, "params");
                            EXPECT(p <= in_flight, "%s after %s: %.0f parameter bytes on the device, slots hold %.0f",
                                   name.c_str(), mem.text(i, "phase").c_str(), p, in_flight);
                            if (mem.text(i, "phase") == "step")
                                EXPECT(p == 0, "%s: parameter bytes left on the device after the step", name.c_str());
                        }
                }
            }

    // --- offload under gradient accumulation: micro-steps added on the host or on
    // the device, the same bits as without offload (a global batch of 8 sequences,
    // 2 per rank per micro-step: 4 micro-steps on one rank, 2 on two)
    const int accum_steps = 4;
    for (const char* precision : {"fp32", "bf16"})
        for (int n : {1, 2})
            for (int z = 2; z <= 3; z++) {
                std::string name = "acc_z" + std::to_string(z) + "n" + std::to_string(n) + precision;
                TrainerRun run = base;
                run.precision = precision;
                run.stage = z;
                run.ranks = n;
                run.micro_batch = 2;
                run.steps = accum_steps;
                RunResult plain = run_into(name, run);
                run.offload_optimizer = true;
                run.offload_grad_accum = "host";
                RunResult host = run_into(name + "_host", run);
                run.offload_grad_accum = "device";
                RunResult device = run_into(name + "_device", run);
                EXPECT(device.output.find("gradients add up in a device shard") != std::string::npos &&
                           host.output.find("gradients accumulate on the host") != std::string::npos,
                       "%s: the headers do not say where gradients accumulate:\n%s", name.c_str(),
                       device.output.c_str());
                // the per-step line on where an offloaded step's host time went: one per
                // rank per step, and none without offload
                auto count = [](const std::string& text, const std::string& what) {
                    size_t k = 0;
                    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) k++;
                    return k;
                };
                const std::string line = " | waiting for the device ";
                EXPECT(count(host.output, line) == (size_t)(accum_steps * n) &&
                           count(device.output, line) == (size_t)(accum_steps * n) && count(plain.output, line) == 0,
                       "%s: expected %d offload timing lines per offloaded run, got %zu and %zu (%zu without offload)",
                       name.c_str(), accum_steps * n, count(host.output, line), count(device.output, line),
                       count(plain.output, line));
                for (const RunResult* r : {&host, &device}) {
                    const char* where = r == &host ? "host" : "device";
                    EXPECT(r->train_losses.size() == (size_t)accum_steps && r->train_losses == plain.train_losses,
                           "%s: losses with gradients accumulated on the %s differ from the run without offload",
                           name.c_str(), where);
                    std::string m = r->model_at(accum_steps), want = plain.model_at(accum_steps);
                    EXPECT(files_identical(want, m), "%s: accumulating on the %s changes the parameters (%.3g)",
                           name.c_str(), where, relative_error(read_model_params(m), read_model_params(want)));
                }
                // where the gradients were between micro-steps: the device shard after the
                // last forward with device, none with host; either way the LM head's wte
                // gradient, which meets the encoder's once per step (zero/engine/zero_engine.h)
                double shard = 0, head = 0, device_grads[2] = {-1, -1};
                {
                    ParamLayout layout(gpt2_config_from_descriptor(TINY));
                    ShardPlan plan(layout.unit_specs(), n, SHARD_ALIGN);
                    double s = std::string(precision) == "fp32" ? 4 : 2;
                    shard = (double)plan.shard_numel * s;
                    head = (double)layout.numel(WTE) * s;
                }
                for (const RunResult* r : {&host, &device}) {
                    CsvRows mem = r->mem_report(0);
                    for (size_t i = 0; i < mem.rows.size(); i++)
                        if (mem.text(i, "phase") == "forward" && mem.text(i, "arena") == "device")
                            device_grads[r == &device] = mem.num(i, "grads");
                }
                EXPECT(device_grads[0] == head && device_grads[1] == shard + head,
                       "%s: device gradient bytes after forward: host %.0f (want %.0f), device %.0f (want %.0f)",
                       name.c_str(), device_grads[0], head, device_grads[1], shard + head);
            }

    // --- recomputation: the same gradients from less activation memory
    // (four layers, so that two layer outputs on the device are fewer than all of them)
    TrainerRun deeper = base;
    deeper.model = TINY_4_LAYERS;
    deeper.stage = 2;
    deeper.ranks = 2;
    deeper.micro_batch = 4;
    std::string r0 = run_into("r0", deeper).model_at(steps);
    double acts[4] = {0, 0, 0, 0};
    struct Mode {
        const char* name;
        int recompute;
        bool outputs_on_host;
    };
    const Mode modes[4] = {{"-r 0", 0, false}, {"-r 1", 1, false}, {"-r 2", 2, false}, {"-r 2 --offload_activations 1", 2, true}};
    for (int i = 0; i < 4; i++) {
        TrainerRun run = deeper;
        run.recompute = modes[i].recompute;
        run.offload_activations = modes[i].outputs_on_host;
        RunResult r = run_into("r" + std::to_string(i) + "x", run);
        std::string m = r.model_at(steps);
        EXPECT(files_identical(r0, m), "%s changes the parameters (%.3g)", modes[i].name,
               relative_error(read_model_params(m), read_model_params(r0)));
        CsvRows mem = r.mem_report(0);
        for (size_t k = 0; k < mem.rows.size(); k++)
            if (mem.text(k, "phase") == "forward" && mem.text(k, "arena") == "device")
                acts[i] = mem.num(k, "activations");
    }
    EXPECT(acts[1] < acts[0] && acts[2] < acts[1] && acts[3] < acts[2],
           "activation bytes after forward do not fall with recomputation: %.0f %.0f %.0f %.0f", acts[0], acts[1],
           acts[2], acts[3]);
    printf("activations after forward: -r 0 %.0f, -r 1 %.0f, -r 2 %.0f, -r 2 on host %.0f bytes\n", acts[0], acts[1],
           acts[2], acts[3]);

    // --- guard rails: refused before allocating, with the numbers and what would fit
    TrainerRun gpt2_124m(base.trainer);  // GPT-2 124M at B=8, T=1024 in 4 GiB
    gpt2_124m.model = "d12";
    gpt2_124m.micro_batch = 8;
    gpt2_124m.seq_len = 1024;
    gpt2_124m.steps = 1;
    TrainerRun big = gpt2_124m;
    big.stage = 0;
    big.train = dir + "/train.bin";
    big.extra = "--device_memory 4096";
    RunResult refused = big.try_run();
    EXPECT(refused.status == 1, "a run that cannot fit was not refused (status %d)", refused.status);
    EXPECT(refused.output.find("error: predicted out of memory") != std::string::npos &&
               refused.output.find("these would make this run fit") != std::string::npos &&
               refused.output.find("-b 1 (x8 micro-steps)") != std::string::npos,
           "the refusal does not give the numbers and the alternatives:\n%s", refused.output.c_str());
    EXPECT(refused.output.find("training") == std::string::npos, "it started before refusing:\n%s",
           refused.output.c_str());
    TrainerRun hopeless = gpt2_124m;  // in 1 MiB
    hopeless.extra = "--device_memory 1";
    RunResult nothing_fits = hopeless.try_run();
    EXPECT(nothing_fits.status == 1 && nothing_fits.output.find("no combination") != std::string::npos,
           "a hopeless run should say nothing fits:\n%s", nothing_fits.output.c_str());
    return test_summary("offload_recompute");
}

// Offload and ZeRO-R on the CPU build ("device" and "host" are separate
// accounting arenas of the same RAM here):
//   * optimizer offload (stages 1-3) and parameter offload (stage 3), N = 1, 2, 4:
//     parameters after 10 steps are bit-identical to the run without offload —
//     the host path runs the same arithmetic (the vectorised CPU AdamW equals the
//     scalar twin bit for bit, see test_cpu_adamw) on the same values;
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

#include "test/trainer_harness.h"
#include "zero/engine/checkpoint.h"
#include "zero/engine/memory_predictor.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <train_gpt2_zero_cpu>\n", argv[0]);
        return 2;
    }
    std::string trainer = argv[1];
    std::string dir = "offload";
    run_command("rm -rf " + dir);
    make_dir(dir);
    write_markov_shard(dir + "/train.bin", 512, 40000, 9);
    const char* shape = "L=2,H=4,C=64,V=512,T=32";
    const int steps = 10;
    std::string common = trainer + " -e " + shape + " -t 32 -l 3e-3 -u 2 -q 0.1 -c 0.1 -v 0 -s 0 -i " + dir +
                         "/train.bin -x " + std::to_string(steps) + " -d " + std::to_string(8 * 32);
    auto run = [&](const std::string& name, const std::string& flags) {
        std::string out = dir + "/" + name;
        CommandResult r = run_command(common + " -o " + out + " --mem_report 1 " + flags);
        EXPECT(r.status == 0, "%s (%s) failed:\n%s", name.c_str(), flags.c_str(), r.output.c_str());
        return checkpoint_dir(out, steps) + "/model.bin";
    };

    // --- offload versus none, every stage that allows it, N = 1, 2, 4
    for (const char* precision : {"fp32", "bf16"})
        for (int n : {1, 2, 4})
            for (int z = 1; z <= 3; z++) {
                std::string base = "z" + std::to_string(z) + "n" + std::to_string(n) + precision;
                std::string flags = "-p " + std::string(precision) + " -z " + std::to_string(z) + " --ranks " +
                                    std::to_string(n) + " -b " + std::to_string(8 / n);
                std::string plain = run(base, flags);
                std::string opt = run(base + "_oo", flags + " --offload_optimizer cpu");
                EXPECT(files_identical(plain, opt), "%s: optimizer offload changes the parameters (%.3g)",
                       base.c_str(), relative_error(read_model_params(opt), read_model_params(plain)));
                if (z == 3) {
                    std::string par = run(base + "_op", flags + " --offload_optimizer cpu --offload_param cpu");
                    EXPECT(files_identical(plain, par), "%s: parameter offload changes the parameters", base.c_str());
                    // the device holds parameters only while a unit is gathered
                    CsvRows mem = read_csv(dir + "/" + base + "_op/mem_report_rank0.csv");
                    ParamLayout layout(gpt2_config_from_descriptor(shape));
                    ShardPlan plan(layout.unit_specs(), n, SHARD_ALIGN);
                    double s = std::string(precision) == "fp32" ? 4 : 2;
                    double in_flight = (plan.padded[0] + 2.0 * plan.padded[1]) * s;  // the three unit slots
                    for (size_t i = 0; i < mem.rows.size(); i++)
                        if (mem.text(i, "arena") == "device") {
                            double p = mem.num(i, "params");
                            EXPECT(p <= in_flight, "%s after %s: %.0f parameter bytes on the device, slots hold %.0f",
                                   base.c_str(), mem.text(i, "phase").c_str(), p, in_flight);
                            if (mem.text(i, "phase") == "step")
                                EXPECT(p == 0, "%s: parameter bytes left on the device after the step", base.c_str());
                        }
                }
            }

    // --- recomputation: the same gradients from less activation memory
    // (four layers, so that two layer outputs on the device are fewer than all of them)
    const std::string deeper = "-e L=4,H=4,C=64,V=512,T=32 -z 2 --ranks 2 -b 4 ";
    std::string r0 = run("r0", deeper);
    double acts[4] = {0, 0, 0, 0};
    const char* modes[4] = {"-r 0", "-r 1", "-r 2", "-r 2 --offload_activations 1"};
    for (int i = 0; i < 4; i++) {
        std::string name = "r" + std::to_string(i) + "x";
        std::string m = run(name, deeper + modes[i]);
        EXPECT(files_identical(r0, m), "%s changes the parameters (%.3g)", modes[i],
               relative_error(read_model_params(m), read_model_params(r0)));
        CsvRows mem = read_csv(dir + "/" + name + "/mem_report_rank0.csv");
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
    CommandResult big = run_command(trainer + " -e d12 -b 8 -t 1024 -z 0 --device_memory 4096 -x 1 -i " + dir +
                                    "/train.bin");
    EXPECT(big.status == 1, "a run that cannot fit was not refused (status %d)", big.status);
    EXPECT(big.output.find("error: predicted out of memory") != std::string::npos &&
               big.output.find("these would fit") != std::string::npos &&
               big.output.find("-b 1 (same tokens per step)") != std::string::npos,
           "the refusal does not give the numbers and the alternatives:\n%s", big.output.c_str());
    EXPECT(big.output.find("training") == std::string::npos, "it started before refusing:\n%s", big.output.c_str());
    CommandResult hopeless = run_command(trainer + " -e d12 -b 8 -t 1024 --device_memory 1 -x 1");
    EXPECT(hopeless.status == 1 && hopeless.output.find("no single change") != std::string::npos,
           "a hopeless run should say nothing fits:\n%s", hopeless.output.c_str());
    return test_summary("offload_recompute");
}

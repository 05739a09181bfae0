// The fit check answers per rank, and apart from that for the machine hosting
// the emulation; its advice searches combinations and every suggestion fits.
//   * 64 emulated ranks of GPT-2 1.5B (d48, bf16, stage 3) planned for 40000 MiB
//     devices: each rank fits (--estimate 1 exits 0), whatever the 64 ranks
//     together would need of this machine;
//   * a real run of that needs this machine to hold all 64: refused, saying the
//     plan fits and the machine does not;
//   * d48 at -z 1 -b 4 in 4000 MiB per rank: no single change fits; the advice
//     lists combinations, cheapest first, and each one, re-estimated with its
//     flags, fits; and on more devices, the fewest pipeline stages that fit:
//     re-estimated, that fits (every stage), half of it does not;
//   * 9.27B with optimizer offload planned for an 80 GB device and 106.7 GiB of
//     host (--host_memory): the host is the bound, the cheapest advice keeps the
//     gradient shard on the device, which fits; 9.47B does not;
//   * 13.9B the same: the advice puts the states on disk (nvme); 35% of them on a
//     disk of 55.7 GiB fits, on one of 39 GiB or 40% of them does not;
//   * the arithmetic, in this process: the host margin is 4 GiB + 10% of
//     /proc/meminfo's MemAvailable read at run time, and what is left is the
//     rest; the CPU build's machine check adds the device and host arenas (one
//     RAM): a run whose arenas each fit but whose sum does not is refused, and
//     the plan's shared check and the planned device's checks likewise.
//
// usage: test_fit_check <path to train_gpt2_zero_cpu>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "test/trainer_run.h"
#include "zero/run/fit_check.h"

// memory_capacity's host against /proc/meminfo, read before and after it.
static void test_host_margin() {
    const double GiB = 1073741824.0;
    TrainOptions o;
    const double before = host_available_bytes();
    MemoryCapacity cap = memory_capacity(o);
    const double after = host_available_bytes();
    const double available = cap.host + cap.host_margin;  // what it read
    EXPECT(before > 0 && after > 0, "/proc/meminfo has MemAvailable");
    EXPECT(available >= std::min(before, after) && available <= std::max(before, after),
           "the margin and what is left add up to MemAvailable: %.3f GiB, read %.3f and %.3f GiB", available / GiB,
           before / GiB, after / GiB);
    EXPECT(std::fabs(cap.host_margin - (4 * GiB + 0.10 * available)) < 1.0,
           "the host margin is 4 GiB + 10%% of MemAvailable: %.3f GiB of %.3f GiB", cap.host_margin / GiB,
           available / GiB);
    EXPECT(cap.shared && cap.device == cap.host && cap.plan_device == cap.host && cap.plan_host == cap.host,
           "the CPU build's device is the host's RAM, after the same margin");
}

// The two checks' arithmetic on one rank's predicted arenas.
static void test_machine_and_plan_sums() {
    MemoryQuery q;
    q.cfg = gpt2_config_from_descriptor("L=2,H=4,C=64,V=512,T=32");
    q.stage = 1, q.world = 2, q.micro_batch = 2, q.seq_len = 32, q.dtype_bytes = 4, q.offload_optimizer = true;
    double dev, host;
    rank_need(q, dev, host);
    EXPECT(dev > 0 && host > 0, "an offloaded rank has device and host arenas: %.0f, %.0f bytes", dev, host);
    const int ranks = 3;
    MemoryCapacity shared;  // the CPU build: one RAM
    shared.shared = true;
    shared.host = shared.device = shared.plan_device = shared.plan_host = ranks * (dev + host);
    EXPECT(machine_fits(q, ranks, shared), "3 ranks in exactly their arenas' sum");
    shared.host = shared.device = ranks * (dev + host) - 1;
    EXPECT(!machine_fits(q, ranks, shared), "3 ranks in a byte less than their device and host arenas");
    shared.host = shared.device = ranks * std::max(dev, host) + 1;  // either arena alone fits
    EXPECT(!machine_fits(q, ranks, shared), "the host arena forgotten: each arena fits alone, their sum does not");
    shared.plan_device = shared.plan_host = dev + host;
    EXPECT(plan_fits(q, shared), "one rank in exactly its arenas' sum");
    shared.plan_device = shared.plan_host = dev + host - 1;
    EXPECT(!plan_fits(q, shared), "one rank in a byte less");
    MemoryCapacity gpu;  // a device of its own, and a host
    gpu.device = gpu.plan_device = ranks * dev, gpu.host = gpu.plan_host = ranks * host;
    EXPECT(machine_fits(q, ranks, gpu) && plan_fits(q, gpu), "device and host each exactly full");
    gpu.host = ranks * host - 1;
    EXPECT(!machine_fits(q, ranks, gpu), "the host a byte short");
    gpu.host = ranks * host, gpu.device = ranks * dev - 1;
    EXPECT(!machine_fits(q, ranks, gpu), "the device a byte short");
    gpu.planned = true, gpu.plan_device = dev, gpu.plan_host = host - 1;
    EXPECT(!plan_fits(q, gpu), "the planned host a byte short");
}

int main(int argc, char** argv) {
    test_host_margin();
    test_machine_and_plan_sums();
    const std::string trainer = trainer_from_args(argc, argv);
    auto estimate = [&](const std::string& flags) {
        return run_command(trainer + " -e d48 -t 1024 -p bf16 " + flags + " --estimate 1");
    };

    // per rank, not per process
    CommandResult many = estimate("-b 1 -z 3 --ranks 64 --device_memory 40000");
    EXPECT(many.status == 0 && many.output.find("on a device of 39.06 GiB (--device_memory): fits") != std::string::npos &&
               many.output.find("this machine hosting 64 rank(s):") != std::string::npos &&
               many.output.find("fits: yes") != std::string::npos,
           "64 ranks, each fitting a 40000 MiB device:\n%s", many.output.c_str());
    CommandResult run = run_command(trainer + " -e d48 -t 1024 -p bf16 -b 1 -z 3 --ranks 64 --device_memory 40000 -x 1");
    EXPECT(run.status == 1 && run.output.find("it fits the planned device, but this machine cannot host all its ranks") !=
                                  std::string::npos,
           "a run whose 64 ranks this machine cannot hold:\n%s", run.output.c_str());

    // the advice: combinations, each of which fits
    CommandResult tight = estimate("-b 4 -z 1 --ranks 8 --device_memory 4000");
    EXPECT(tight.status == 1 && tight.output.find("fits: no") != std::string::npos &&
               tight.output.find("these would make each rank fit (cheapest first") != std::string::npos,
           "d48 -z 1 -b 4 in 4000 MiB:\n%s", tight.output.c_str());
    std::istringstream lines(tight.output);
    std::string line;
    int suggestions = 0, single_changes = 0;
    while (std::getline(lines, line)) {
        size_t dev = line.find("device ");
        if (line.rfind("    -", 0) != 0 || dev == std::string::npos) continue;
        std::string flags = line.substr(4, dev - 4);
        std::string plain;  // the flags without the "(xN micro-steps)" remarks
        for (size_t i = 0; i < flags.size(); i++) {
            if (flags[i] == '(') i = flags.find(')', i);
            else plain += flags[i];
        }
        int changes = 0;
        for (size_t i = 0; i + 1 < plain.size(); i++) changes += plain[i] == '-' && (i == 0 || plain[i - 1] == ' ');
        single_changes += changes == 1;
        CommandResult again = estimate("-b 4 -z 1 --ranks 8 --device_memory 4000 " + plain);
        EXPECT(again.status == 0 && again.output.find("fits: yes") != std::string::npos,
               "the suggestion '%s' does not fit when estimated:\n%s", plain.c_str(), again.output.c_str());
        suggestions++;
    }
    EXPECT(suggestions >= 2, "%d suggestions:\n%s", suggestions, tight.output.c_str());
    EXPECT(single_changes == 0, "a single change was suggested where none fits:\n%s", tight.output.c_str());
    int pp = 0, ranks = 0;
    size_t at = tight.output.find("times the devices: --pp ");
    if (at != std::string::npos) sscanf(tight.output.c_str() + at, "times the devices: --pp %d (%d ranks", &pp, &ranks);
    EXPECT(pp > 1 && ranks == 8 * pp, "no --pp proposed:\n%s", tight.output.c_str());
    if (pp > 1) {
        auto with_pp = [&](int p) {
            return estimate("-b 4 -z 1 --device_memory 4000 --ranks " + std::to_string(8 * p) + " --pp " + std::to_string(p));
        };
        CommandResult fits = with_pp(pp), half = with_pp(pp / 2);
        EXPECT(fits.status == 0 && fits.output.find("fits: yes") != std::string::npos,
               "the proposed --pp %d does not fit when estimated:\n%s", pp, fits.output.c_str());
        EXPECT(pp / 2 == 1 || (half.status == 1 && half.output.find("fits: no") != std::string::npos),
               "--pp %d fits too, but --pp %d was proposed:\n%s", pp / 2, pp, half.output.c_str());
    }
    // the host as the bound (--host_memory): optimizer offload of 9.27B parameters
    // (d48's width, 45 layers) on an 80 GB device and the 106.7 GiB a 123 GiB
    // host leaves after the margin. The cheapest advice keeps the gradient shard
    // on the device, and with it the run fits; one layer more does not
    const std::string big = trainer + " -t 1024 -p bf16 -b 1 -z 3 -r 2 --offload_optimizer cpu --device_memory 81559 "
                                      "--host_memory 109260 --estimate 1 -e L=";
    CommandResult host_bound = run_command(big + "45,H=32,C=4096");
    size_t advice = host_bound.output.find("these would make each rank fit");
    size_t first = host_bound.output.find("\n    -", advice);
    EXPECT(host_bound.status == 1 && host_bound.output.find("(--host_memory): does NOT fit") != std::string::npos &&
               advice != std::string::npos && first != std::string::npos &&
               host_bound.output.compare(first + 5, 27, "--offload_grad_accum device") == 0,
           "9.27B with optimizer offload on a 106.7 GiB host:\n%s", host_bound.output.c_str());
    CommandResult lean = run_command(big + "45,H=32,C=4096 --offload_grad_accum device");
    CommandResult one_more = run_command(big + "46,H=32,C=4096 --offload_grad_accum device");
    EXPECT(lean.status == 0 && lean.output.find("fits: yes") != std::string::npos,
           "9.27B with the gradient shard on the device:\n%s", lean.output.c_str());
    EXPECT(one_more.status == 1 && one_more.output.find("fits: no") != std::string::npos,
           "9.47B with the gradient shard on the device fits 106.7 GiB of host:\n%s", one_more.output.c_str());

    // host and disk together (--offload_optimizer nvme, --disk_memory): 13.9B (68 layers) does not fit
    // the host with the states in it; the advice names nvme, and with 35% of the states on a disk of
    // 55.7 GiB free it fits (54.0 GiB on disk, the rest of the host's); on a disk of 40 GiB it does not,
    // and at 40% on disk it needs more than the 55.7 GiB
    CommandResult all_host = run_command(big + "68,H=32,C=4096 --offload_grad_accum device");
    EXPECT(all_host.status == 1 && all_host.output.find("--offload_optimizer nvme --nvme_path DIR") != std::string::npos,
           "13.9B with the states in host memory: no advice to put them on disk:\n%s", all_host.output.c_str());
    const std::string split = big + "68,H=32,C=4096 --offload_grad_accum device --offload_optimizer nvme "
                                    "--nvme_path . --nvme_fraction ";
    CommandResult fits_split = run_command(split + "0.35 --disk_memory 57000");
    CommandResult small_disk = run_command(split + "0.35 --disk_memory 40000");
    CommandResult more_on_disk = run_command(split + "0.4 --disk_memory 57000");
    EXPECT(fits_split.status == 0 && fits_split.output.find("fits: yes") != std::string::npos,
           "13.9B with 35%% of its states on a 55.7 GiB disk:\n%s", fits_split.output.c_str());
    EXPECT(small_disk.status == 1 && small_disk.output.find("disk") != std::string::npos &&
               more_on_disk.status == 1,
           "13.9B fits a 39 GiB disk, or 40%% of its states a 55.7 GiB one:\n%s\n%s", small_disk.output.c_str(),
           more_on_disk.output.c_str());

    // the same without the estimate: refused before allocating anything
    CommandResult refused = run_command(trainer + " -e d48 -t 1024 -p bf16 -b 4 -z 1 --ranks 8 --device_memory 4000 -x 1");
    EXPECT(refused.status == 1 && refused.output.find("error: predicted out of memory") != std::string::npos &&
               refused.output.find("training") == std::string::npos,
           "refusal:\n%s", refused.output.c_str());
    return test_summary("fit_check");
}

// The memory predictor (zero/engine/memory_predictor.h, closed forms written
// apart from the allocation code) against the dry run's accountant
// (zero/run/dry_run.h: the trainer's own allocations and live bytes, nothing
// computed), at the paper's scale and beyond, to the byte: every arena and
// kind, reserved and after forward, backward and the step, every stage's rank:
//   * 7.5B parameters on 64 ranks, ZeRO stages 0-3 (the paper's Figure 1 model);
//   * the paper's 100B model: tensor parallelism 16 x 25 data-parallel ranks on
//     400 GPUs, stage 2, Pa;
//   * a 3-D grid: 4 pipeline stages x tensor parallelism 4 x 4 data-parallel ranks,
//     stage 1, 8 micro-batches, 1F1B;
//   * offloaded: stage 3 with optimizer and parameter offload; stage 2 with the
//     gradients on the device and the delayed update; activation offload with Pa;
//   * a 1T model at stage 3 on 1024 ranks.
#include <cstdio>
#include <string>
#include <vector>

#include "test/test_util.h"
#include "zero/run/dry_run.h"

static void check(const std::string& flags) {
    TrainOptions o = options_from_flags(flags);
    RunSetup run = make_run_setup(o);
    HostClock clock;
    std::vector<RecordedRank> dry = dry_run(o, run);
    const double seconds = clock.seconds();
    for (const RecordedRank& d : dry) {
        MemoryPrediction p = predict_memory(d.q, SHARD_ALIGN);
        const MemCounts* got[4] = {&d.reserved, &d.live.forward, &d.live.backward, &d.live.step};
        const MemCounts* want[4] = {&p.reserved, &p.after_forward, &p.after_backward, &p.after_step};
        const char* phase[4] = {"reserved", "after forward", "after backward", "after step"};
        for (int ph = 0; ph < 4; ph++)
            for (int a = 0; a < NUM_ARENAS; a++)
                for (int k = 0; k < NUM_MEM_KINDS; k++) {
                    const size_t g = got[ph]->get((Arena)a, (MemKind)k), w = want[ph]->get((Arena)a, (MemKind)k);
                    EXPECT(g == w, "%s, rank %d, %s, %s %s: the dry run %zu bytes, the predictor %zu (%+lld)",
                           flags.c_str(), d.rank, phase[ph], arena_name((Arena)a), mem_kind_name((MemKind)k), g, w,
                           (long long)g - (long long)w);
                }
    }
    printf("%-120s %zu rank(s), %.2f s: %.2f GiB device, %.2f GiB host reserved on rank 0\n", flags.c_str(), dry.size(),
           seconds, dry[0].reserved.total(Arena::Device) / 1073741824.0, dry[0].reserved.total(Arena::Host) / 1073741824.0);
}

int main() {
    const std::string b7 = "-e L=65,H=24,C=3072,V=50257,T=1024 -p fp16 -t 1024 -b 2 -r 2 --ranks 64";
    for (int z = 0; z <= 3; z++) check(b7 + " -z " + std::to_string(z));
    const std::string b100 = "-e L=125,H=64,C=8192,V=50257,T=1024 -p fp16 -t 1024 -r 2";
    check(b100 + " -b 32 -z 2 --tp 16 --ranks 400");
    check(b100 + " -b 8 -z 1 --tp 4 --pp 4 --ranks 64 -d 262144");
    check(b100 + " -b 1 -z 3 --ranks 64 --offload_optimizer cpu --offload_param cpu");
    check(b100 + " -b 2 -z 2 --ranks 64 --offload_optimizer cpu --offload_grad_accum device --offload_delay_steps 2 "
                 "-d 524288");
    check(b100 + " -b 4 -z 2 --tp 8 --ranks 64 --offload_activations 1");
    check("-e L=128,H=160,C=25600,V=50257,T=2048 -p bf16 -t 2048 -b 1 -r 2 -z 3 --ranks 1024");
    return test_summary("dry_run_scale");
}

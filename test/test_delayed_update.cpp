// The delayed parameter update (--offload_delay_steps W, ZeRO-Offload's DPU),
// in process with emulated ranks, against the obvious reference: the engine
// without offload, driven so that every step after the first W computes on
// the parameters from before the update the previous step took — the driver
// reads the parameters at each step's start and writes back the ones it read
// at the previous step's — while its master, m and v take every update at
// once. For stages 1, 2 and 3 (the reference: stage 1, 2 and 2, which are
// bit-identical to 3), N = 1 and 2, one to three micro-steps, gradients added
// up on the host and on the device, fp32, bf16 and fp16:
//   * every step's loss and gradient norm, and after the last step (the
//     pending AdamW applied) master, m, v and the device's parameters are
//     bit-identical to the reference's;
//   * a skipped step (fp16 overflow, forced by a huge loss scale) queues
//     nothing and brings the device up to date; the next step starts the
//     delay again, as step W does (the reference then writes nothing back);
//   * the memory predictor with offload_delay equals the accountant at every
//     phase of a steady step (a second host gradient buffer, live from a step's
//     end to the next step's).
// The CPU build runs the queued AdamW as late as a worker could (at the next
// step's end, after its backward has written its gradients), so a gradient
// buffer shared by two steps, or an update applied a step early or late,
// changes the bits.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test/memory_check.h"
#include "test/model_shapes.h"
#include "test/synthetic_batch.h"
#include "test/test_util.h"
#include "zero/base/rng.h"
#include "zero/comm/comm_emulated.h"
#include "zero/engine/memory_predictor.h"
#include "zero/engine/zero_engine.h"
#include "zero/model/gpt2.h"

#ifdef _OPENMP
#include <omp.h>
#endif

struct Case {
    int stage, ranks, micro_steps;
    bool device_accum;  // --offload_grad_accum device
    DType dtype;
    int delay = 2;      // W
    int skip_at = -1;   // fp16: the step whose gradients overflow
};

struct Rank {
    std::vector<double> losses, norms;  // this rank's loss sums and the norms, per step
    std::vector<char> skipped;
    std::vector<float> master, m, v;
    std::vector<uint8_t> params;  // every unit's compute-dtype parameters after the last step
};

constexpr int STEPS = 10, GLOBAL_SEQS = 4, SEQ = 32;

// One run of case c on every rank: with the delayed update (delayed), or the
// reference without offload.
template <typename T>
static std::vector<Rank> run_case(const Case& c, bool delayed, const std::string& name) {
    const GPT2Config cfg = gpt2_config_from_descriptor(TINY);
    const int N = c.ranks, B = GLOBAL_SEQS / N, A = c.micro_steps, V = cfg.vocab_size;
    std::vector<Rank> out(N);
    run_emulated_ranks(N, [&](int rank, EmulatedWorld& shared) {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        KernelCtx comm_ctx;
        EmulatedComm comm(shared, rank, comm_ctx);
        MemoryAccountant mem(rank);
        KernelCtx ctx = create_kernel_ctx(mem, (size_t)B * SEQ, cfg.channels, cfg.num_heads);
        ParamLayout layout(cfg);
        ZeroConfig zc;
        zc.stage = delayed ? c.stage : std::min(c.stage, 2);  // the reference sets its full parameters
        zc.micro_steps = A;
        zc.offload.states = delayed ? StateHome::Host : StateHome::Device;
        zc.offload.sums = c.device_accum ? GradSums::Device : GradSums::Host;
        zc.offload.delay_steps = delayed ? c.delay : 0;
        zc.seed = 5;
        Rank& r = out[rank];
        {
            ZeroEngine<T> zero(layout, comm, mem, ctx, zc);
            GPT2<T> model(zero, B, SEQ, 0, false, mem, false);
            zero.init_parameters(1337);
            OptimizerConfig oc;
            oc.beta1 = 0.9f, oc.beta2 = 0.95f, oc.eps = 1e-8f, oc.weight_decay = 0.1f, oc.grad_clip = 1.0f;
            MemoryQuery q;
            q.cfg = cfg, q.stage = c.stage, q.world = N, q.dtype_bytes = sizeof(T), q.micro_batch = B;
            q.seq_len = SEQ, q.micro_steps = A, q.offload_optimizer = true;
            q.offload_grad_accum_device = c.device_accum, q.offload_delay = true;
            MemoryPrediction pred = predict_memory(q, SHARD_ALIGN);

            const size_t full = zero.plan.full_numel * sizeof(T);
            std::vector<uint8_t> current(full), before(full);  // the reference's: this step's, the last step's
            bool deferred = false;  // the reference: the last step's update is one the delay holds back
            std::vector<int> inputs(B * SEQ), targets(B * SEQ);
            for (int step = 0; step < STEPS; step++) {
                if (!delayed) {  // compute on the parameters from before the last update, if it was held back
                    zero.copy_to_host(current.data(), zero.full_parameters(), full);
                    if (deferred) zero.copy_to_device(zero.full_parameters(), before.data(), full);
                    before = current;
                }
                const float scale = c.dtype != DType::F16 ? 1.0f : step == c.skip_at ? 1e30f : 1024.0f;
                const float dloss = scale / (GLOBAL_SEQS * SEQ * A);
                MemCounts live_fwd, live_bwd;
                for (int micro = 0; micro < A; micro++) {
                    fill_synthetic_batch(inputs, targets, step, micro, rank * B, B, SEQ, V);
                    model.forward(inputs.data(), targets.data(), B, SEQ, dloss);
                    model.add_losses(micro == 0);
                    live_fwd = mem.live_bytes();
                    model.backward(micro);
                    live_bwd = mem.live_bytes();
                }
                StepResult res = zero.step(1e-3f, oc, scale);
                stream_sync(ctx.stream);
                r.losses.push_back(model.read_loss_sum(true));
                MemCounts live_step = mem.live_bytes();  // (as the trainer: after the loss is read back)
                r.norms.push_back(res.grad_norm);
                r.skipped.push_back(res.skipped);
                EXPECT(res.skipped == (step == c.skip_at), "%s rank %d step %d: skipped %d", name.c_str(), rank,
                       step, (int)res.skipped);
                deferred = !res.skipped && zero.adam_t > c.delay;
                // a skipped step leaves the parameters it computed on; the delayed run catches up instead
                if (!delayed && res.skipped) zero.copy_to_device(zero.full_parameters(), current.data(), full);
                if (delayed && step == STEPS - 1)
                    expect_memory_as_predicted(mem.reserved_bytes(), live_fwd, live_bwd, live_step, pred,
                                               name + " rank " + std::to_string(rank));
            }
            zero.apply_pending_update();
            const size_t n = zero.optimizer_numel();
            r.master.resize(n), r.m.resize(n), r.v.resize(n);
            zero.read_states(r.master.data(), r.m.data(), r.v.data());
            for (int u = 0; u < zero.plan.num_units(); u++) {
                const T* unit = zero.acquire_params_for_export(u);
                size_t bytes = zero.plan.padded[u] * sizeof(T), at = r.params.size();
                r.params.resize(at + bytes);
                zero.copy_to_host(r.params.data() + at, unit, bytes);
                zero.release_params_after_export(u);
            }
        }
        destroy_kernel_ctx(ctx);
    });
    return out;
}

template <typename T>
static void check_case(const Case& c) {
    char buf[128];
    snprintf(buf, sizeof(buf), "z%d n%d a%d %s%s W%d%s", c.stage, c.ranks, c.micro_steps, dtype_name(c.dtype),
             c.device_accum ? " acc-dev" : "", c.delay, c.skip_at >= 0 ? (" skip@" + std::to_string(c.skip_at)).c_str() : "");
    const std::string name = buf;
    std::vector<Rank> got = run_case<T>(c, true, name), want = run_case<T>(c, false, name + " (reference)");
    int first_diff = -1;
    for (int rank = 0; rank < c.ranks; rank++) {
        const Rank &g = got[rank], &w = want[rank];
        for (int s = 0; s < STEPS && first_diff < 0; s++)
            if (g.losses[s] != w.losses[s] || g.norms[s] != w.norms[s]) first_diff = s;
        EXPECT(first_diff < 0, "%s rank %d: step %d's loss %.9g / norm %.9g, the reference's %.9g / %.9g",
               name.c_str(), rank, first_diff, first_diff < 0 ? 0 : g.losses[first_diff],
               first_diff < 0 ? 0 : g.norms[first_diff], first_diff < 0 ? 0 : w.losses[first_diff],
               first_diff < 0 ? 0 : w.norms[first_diff]);
        auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
            return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        EXPECT(same(g.master, w.master) && same(g.m, w.m) && same(g.v, w.v),
               "%s rank %d: master, m or v differ from the reference's", name.c_str(), rank);
        EXPECT(g.params == w.params, "%s rank %d: the final parameters differ from the reference's", name.c_str(), rank);
    }
    // the delay must change what the steps compute (else the comparison proves little)
    EXPECT(got[0].losses[c.delay + 1] != got[0].losses[c.delay], "%s: no learning to delay", name.c_str());
    printf("%-34s losses, norms, master, m, v, parameters: %s\n", name.c_str(),
           first_diff < 0 ? "bit-identical to the reference" : "DIFFER");
}

int main() {
    const Case cases[] = {
        {1, 1, 2, false, DType::F32},
        {1, 2, 2, false, DType::BF16},
        {2, 1, 2, false, DType::F32},
        {2, 2, 1, false, DType::BF16, 1},
        {2, 2, 2, false, DType::BF16},
        {2, 2, 2, true, DType::BF16},
        {3, 2, 2, false, DType::F32},
        {3, 2, 2, true, DType::BF16},
        {3, 1, 3, true, DType::F32, 3},
        {2, 2, 2, false, DType::F16, 2, 5},  // a skipped step while an update is pending
        {3, 2, 2, true, DType::F16, 2, 2},   // ... and at step W, with nothing pending
    };
    for (const Case& c : cases) {
        if (c.dtype == DType::F32) check_case<float>(c);
        if (c.dtype == DType::BF16) check_case<bf16>(c);
        if (c.dtype == DType::F16) check_case<f16>(c);
    }
    return test_summary("delayed_update");
}

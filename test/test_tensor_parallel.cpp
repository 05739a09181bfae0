// Tensor parallelism beside ZeRO, in process with emulated ranks: the engine
// and the model of every rank of a t x d grid train a small GPT-2 for ten steps
// on one global batch per step, and
//   * the losses and the final parameters (every rank's part placed back in the
//     full model) equal the single-rank run's within 1e-5 relative; replicated
//     tensors are bit-identical on every rank of a tensor group;
//   * the tensor group's bytes per rank and step equal the formula: per
//     micro-step an all-reduce of B*T*C elements after the embedding, two per
//     layer in forward (after each row-parallel layer), one for the LM head's
//     input gradient and two per layer in backward (before each column-parallel
//     layer), two more per layer when -r 2 recomputes a block's forward; each
//     moving 2(t-1)/t of its bytes per rank as a ring does; plus the loss's
//     statistics (an all-gather of B*T floats, an all-reduce of 2*B*T);
//   * with sequence parallelism (sp) the same bytes move as reduce-scatters (after
//     the embedding and each row-parallel layer, and of the input gradients in
//     backward) and all-gathers (before each column-parallel layer, of the
//     residual gradient before each row-parallel layer and the encoder), one of
//     each of B*T*C elements per all-reduce above, each (t-1)/t of its bytes;
//     plus an all-reduce of each layernorm's 2C weight gradients;
//   * the data group's bytes equal the ZeRO formulas of test_zero_memory with
//     Psi the t-local plan's padded parameter count and N = d;
//   * the memory predictor equals the accountant at every phase, every rank,
//     with t, and the optimizer state per rank is 12 Psi_t / d (stage 0: 12 Psi_t);
//   * ZeRO-R Pa (-r 2): a run keeping 1/t of each saved layer input and
//     gathering it before recomputation equals the same grid without
//     recomputation to the bit; with --offload_activations its host bytes are
//     1/t of the run without tensor parallelism; its gathers are in the formula.
//
// Why not bit-identical to one rank: a row-parallel layer's output is t
// partial sums over C/t (or 4C/t) inputs added by the all-reduce, where one
// rank sums all C in one GEMM; and the loss's sums of exponentials run per
// rank, then across the group. Float addition is not associative, so the
// results differ in the last bits. Measured (printed): losses within ~1e-8,
// parameters within ~1e-6 (relative 2-norm per tensor) after ten AdamW steps
// at the trainer's default learning rate; see params_gap for the one tensor
// left out and why.
#include <cmath>
#include <cstdio>
#include <map>
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

struct TpCase {
    const char* model = TINY;
    int t = 1, d = 1, stage = 1;
    bool sp = false;
    int recompute = 0, micro_steps = 1;
    bool offload_optimizer = false, offload_param = false, offload_activations = false;
    std::string name() const {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s t=%d%s d=%d z%d r%d A%d%s%s%s", model == TINY ? "L2" : "L4", t,
                 sp ? " sp" : "", d, stage, recompute, micro_steps,
                 offload_optimizer ? " offopt" : "", offload_param ? " offparam" : "",
                 offload_activations ? " offacts" : "");
        return buf;
    }
};

struct TpResult {
    size_t host_activations = 0;  // rank 0's reserved host activation bytes (offloaded layer outputs)
    std::vector<double> losses;
    std::vector<std::vector<float>> units;  // the full model's units, fp32
};

constexpr int STEPS = 10, GLOBAL_SEQS = 4, SEQ = 32;

static double ring_all_reduce_bytes(double elems, int t) { return 2.0 * (t - 1) / t * elems * 4; }

static TpResult run_case(const TpCase& c) {
    const GPT2Config cfg = gpt2_config_from_descriptor(c.model);
    const int t = c.t, d = c.d, N = t * d, B = GLOBAL_SEQS / d, A = c.micro_steps;
    const int C = cfg.channels, L = cfg.num_layers, V = cfg.vocab_size;
    const std::string name = c.name();
    TpResult result;
    const ParamLayout whole(cfg, 1);
    // parts[tp][u]: unit u of the full model with tensor rank tp's part placed in it
    std::vector<std::vector<std::vector<float>>> parts(t, std::vector<std::vector<float>>(whole.num_units()));

    run_emulated_ranks(N, [&](int rank, EmulatedWorld& shared) {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        KernelCtx comm_ctx;
        EmulatedComm world(shared, rank, comm_ctx);
        TpGrid grid(N, t);
        const int tp = grid.tp_rank(rank), dp = grid.dp_rank(rank);
        std::unique_ptr<Comm> tensor, data;
        if (t > 1) {
            tensor = world.split(dp, tp);
            data = world.split(tp, dp);
        }
        Comm& dpc = data ? *data : world;
        MemoryAccountant mem(rank);
        KernelCtx ctx = create_kernel_ctx(mem, (size_t)B * SEQ, C, cfg.num_heads);
        ParamLayout layout(cfg, t);
        ZeroConfig zc;
        zc.stage = c.stage;
        zc.micro_steps = A;
        zc.offload.states = c.offload_optimizer ? StateHome::Host : StateHome::Device;
        zc.offload.params = c.offload_param ? ParamHome::Host : ParamHome::Device;
        zc.seed = 5;
        {
            ZeroEngine<float> zero(layout, dpc, mem, ctx, zc, tensor.get());
            GPT2<float> model(zero, B, SEQ, c.recompute, c.offload_activations, mem, c.sp);
            zero.init_parameters(1337);
            OptimizerConfig oc;
            oc.beta1 = 0.9f, oc.beta2 = 0.95f, oc.eps = 1e-8f, oc.weight_decay = 0.1f, oc.grad_clip = 1.0f;

            MemoryQuery q;
            q.cfg = cfg, q.stage = c.stage, q.world = d, q.tp = t, q.dtype_bytes = 4, q.micro_batch = B;
            q.seq_len = SEQ, q.recompute = c.recompute, q.micro_steps = A;
            q.offload_optimizer = c.offload_optimizer, q.offload_param = c.offload_param;
            q.offload_activations = c.offload_activations;
            q.sp = c.sp;
            MemoryPrediction pred = predict_memory(q, SHARD_ALIGN);

            std::vector<int> inputs(B * SEQ), targets(B * SEQ);
            const float dloss = 1.0f / (GLOBAL_SEQS * SEQ * A);
            for (int step = 0; step < STEPS; step++) {
                world.stats = dpc.stats = CommStats{};
                if (tensor) tensor->stats = CommStats{};
                MemCounts live_fwd, live_bwd;
                for (int micro = 0; micro < A; micro++) {
                    fill_synthetic_batch(inputs, targets, step, micro, dp * B, B, SEQ, V);
                    model.forward(inputs.data(), targets.data(), B, SEQ, dloss);
                    model.add_losses(micro == 0);
                    live_fwd = mem.live_bytes();
                    model.backward(micro);
                    live_bwd = mem.live_bytes();
                }
                zero.step(3e-4f, oc, 1.0f);  // the trainer's default peak learning rate
                stream_sync(ctx.stream);
                double loss = dpc.sum_scalar(model.read_loss_sum(true)) / ((double)GLOBAL_SEQS * SEQ * A);
                MemCounts live_step = mem.live_bytes();  // (as the trainer: after the loss is read back)
                if (rank == 0) result.losses.push_back(loss);

                if (step != STEPS - 1) continue;
                // memory: the predictor against the accountant, every arena and phase
                expect_memory_as_predicted(mem.reserved_bytes(), live_fwd, live_bwd, live_step, pred,
                                           name + " rank " + std::to_string(rank));
                if (rank == 0) result.host_activations = mem.reserved_bytes().get(Arena::Host, MemKind::Activations);
                ShardPlan plan(layout.unit_specs(), d, SHARD_ALIGN);
                double psi_t = (double)plan.full_numel;
                double opt = (double)(mem.reserved_bytes().get(Arena::Device, MemKind::Optimizer) +
                               mem.reserved_bytes().get(Arena::Host, MemKind::Optimizer));
                double want_opt = c.stage == 0 ? 12 * psi_t : 12 * psi_t / d;
                EXPECT(opt == want_opt, "%s rank %d: optimizer state %.0f bytes, 12 Psi_t/d = %.0f", name.c_str(),
                       rank, opt, want_opt);

                // data-parallel bytes: ZeRO's formulas on the t-local model
                double dp_elems = c.stage < 2 ? 2 * psi_t : c.stage == 2 ? (A + 1) * psi_t : 3.0 * A * psi_t;
                double want_dp = dp_elems * (d - 1) / d * 4;
                EXPECT((double)dpc.stats.bulk_sent() == want_dp && (double)dpc.stats.bulk_recv() == want_dp,
                       "%s rank %d: data-parallel bytes %llu sent, formula %.0f", name.c_str(), rank,
                       (unsigned long long)dpc.stats.bulk_sent(), want_dp);
                // tensor-parallel bytes: the formula in the header
                if (tensor) {
                    double BT = (double)B * SEQ;
                    // all-reduces of B*T*C (or, with sp, one all-gather and one reduce-scatter each)
                    double big = A * (1 + 2.0 * L + 1 + 2.0 * L + (c.recompute == 2 ? 2.0 * L : 0));
                    double big_bytes = big * ring_all_reduce_bytes(BT * C, t);
                    double loss_ar = A * ring_all_reduce_bytes(2 * BT, t), loss_ag = A * (t - 1) * BT * 4;
                    double ln_ar = c.sp ? A * (2.0 * L + 1) * ring_all_reduce_bytes(2.0 * C, t) : 0;
                    // Pa (-r 2 without sp): each recomputed layer but the first gathers its input's rows
                    double pa_ag = !c.sp && c.recompute == 2 ? A * (L - 1.0) * (t - 1) * (BT / t) * C * 4 : 0;
                    double half = big * (t - 1) * (BT / t) * C * 4;  // the all-gathers' (= the reduce-scatters') share
                    double want_ar = (c.sp ? 0 : big_bytes) + loss_ar + ln_ar;
                    double want_ag = (c.sp ? half : 0) + loss_ag + pa_ag, want_rs = c.sp ? half : 0;
                    const CommStats& ts = tensor->stats;
                    auto sent = [&](CommOp op) { return (double)ts.sent[(int)op]; };
                    auto recv = [&](CommOp op) { return (double)ts.recv[(int)op]; };
                    EXPECT(sent(CommOp::AllReduce) == want_ar && recv(CommOp::AllReduce) == want_ar,
                           "%s rank %d: tensor all-reduce bytes %.0f, formula %.0f", name.c_str(), rank,
                           sent(CommOp::AllReduce), want_ar);
                    EXPECT(sent(CommOp::AllGather) == want_ag && recv(CommOp::AllGather) == want_ag,
                           "%s rank %d: tensor all-gather bytes %.0f, formula %.0f", name.c_str(), rank,
                           sent(CommOp::AllGather), want_ag);
                    EXPECT(sent(CommOp::ReduceScatter) == want_rs && recv(CommOp::ReduceScatter) == want_rs,
                           "%s rank %d: tensor reduce-scatter bytes %.0f, formula %.0f", name.c_str(), rank,
                           sent(CommOp::ReduceScatter), want_rs);
                    // sequence parallelism moves the same bytes as the all-reduces it replaces
                    if (c.sp)
                        EXPECT(want_ag - loss_ag - pa_ag + want_rs == big_bytes, "%s: the formulas' bytes differ",
                               name.c_str());
                    EXPECT((double)ts.bulk_sent() == want_ar + want_ag + want_rs,
                           "%s rank %d: the tensor group ran other collectives", name.c_str(), rank);
                }
                EXPECT(t == 1 || world.stats.bulk_sent() == 0, "%s rank %d: bulk traffic outside the groups", name.c_str(),
                       rank);
            }
            // the final parameters: every data group exports its units; data rank 0 keeps them
            for (int u = 0; u < layout.num_units(); u++) {
                const float* unit = zero.acquire_params_for_export(u);
                std::vector<float> local(layout.unit_spec(u).numel);
                zero.copy_to_host(local.data(), unit, local.size() * sizeof(float));
                zero.release_params_after_export(u);
                if (dp != 0) continue;
                parts[tp][u].assign(whole.unit_spec(u).numel, NAN);
                layout.tp_place_unit(tp, u, local.data(), parts[tp][u].data());
            }
        }
        destroy_kernel_ctx(ctx);
    });

    // merge the tensor ranks' parts; replicated tensors must agree to the bit
    ParamLayout local(cfg, t);
    for (int u = 0; u < whole.num_units(); u++) {
        std::vector<float> full(whole.unit_spec(u).numel, 0.0f);
        for (int p = 0; p < t; p++)
            local.for_each_tp_run(p, u, [&](size_t, size_t fo, size_t n) {
                for (size_t i = 0; i < n; i++) full[fo + i] = parts[p][u][fo + i];
            });
        for (const TensorSpec& ts : whole.unit_spec(u).tensors) {
            if (!local.tp_replicated(ts.id)) continue;
            size_t differ = 0;
            for (int p = 1; p < t; p++)
                for (size_t i = ts.offset_in_unit; i < ts.offset_in_unit + ts.numel; i++)
                    differ += parts[p][u][i] != parts[0][u][i];
            EXPECT(differ == 0, "%s: replicated %s of unit %d differs across the tensor group in %zu places",
                   name.c_str(), param_tensor_name(ts.id), u, differ);
        }
        result.units.push_back(full);
    }
    return result;
}

// The largest, over the tensors, of |a - ref| / |ref| (2-norms over the
// tensor). The keys' bias is left out: its gradient is zero in exact arithmetic
// (softmax does not change when every key of a row moves by the same vector), so
// what it holds is AdamW's normalised steps on rounding noise, which any change
// of summation order changes at the size of the learning rate. Single elements
// elsewhere may differ more than the norm (Adam divides a small gradient's
// rounding difference by its own small scale), which is why the norm is used.
static double params_gap(const TpResult& a, const TpResult& ref, const std::string& name) {
    const GPT2Config cfg = gpt2_config_from_descriptor(TINY);
    const ParamLayout whole(cfg, 1);
    const size_t C = cfg.channels;
    double worst = 0;
    for (int u = 0; u < whole.num_units(); u++)
        for (const TensorSpec& ts : whole.unit_spec(u).tensors) {
            double n2 = 0, d2 = 0;
            for (size_t i = 0; i < ts.numel; i++) {
                if (ts.id == QKVB && i >= C && i < 2 * C) continue;  // the keys' bias
                double r = ref.units[u][ts.offset_in_unit + i], e = a.units[u][ts.offset_in_unit + i] - r;
                n2 += r * r;
                d2 += e * e;
            }
            double gap = n2 > 0 ? std::sqrt(d2 / n2) : std::sqrt(d2);
            EXPECT(gap <= 1e-5, "%s: %s of unit %d differs from one rank's by %.3g (relative 2-norm)", name.c_str(),
                   param_tensor_name(ts.id), u, gap);
            worst = std::max(worst, gap);
        }
    return worst;
}

static size_t pa_reference = 0;

int main() {
    // the reference of gradient accumulation: the same data-parallel run without
    // tensor parallelism (accumulating on two data ranks reorders sums of its own)
    TpCase single, single_accum;
    single_accum.d = 2, single_accum.micro_steps = 2;
    TpResult ref = run_case(single), ref_accum = run_case(single_accum);
    EXPECT((int)ref.losses.size() == STEPS && ref.losses.back() < ref.losses.front(),
           "the single-rank run trains: %zu losses", ref.losses.size());
    std::vector<TpCase> cases;
    for (int t : {1, 2, 4})
        for (int d : {1, 2})
            for (int stage = 0; stage <= 3; stage++) {
                TpCase c;
                c.t = t, c.d = d, c.stage = stage;
                cases.push_back(c);
            }
    for (int t : {2, 4})
        for (int d : {1, 2})
            for (int stage = 0; stage <= 3; stage++) {
                TpCase c;
                c.t = t, c.d = d, c.stage = stage, c.sp = true;
                cases.push_back(c);
            }
    // offload, recomputation and gradient accumulation on the t-local layout
    TpCase extra;
    extra.t = 2, extra.d = 2, extra.stage = 3, extra.offload_optimizer = true, extra.offload_param = true;
    extra.recompute = 2, extra.offload_activations = true;
    cases.push_back(extra);
    extra = TpCase{};
    extra.t = 4, extra.d = 1, extra.stage = 2, extra.offload_optimizer = true, extra.recompute = 1;
    cases.push_back(extra);
    extra = TpCase{};
    extra.t = 2, extra.d = 2, extra.stage = 1, extra.micro_steps = 2;
    cases.push_back(extra);
    extra.sp = true;
    cases.push_back(extra);
    extra = TpCase{};
    extra.t = 4, extra.d = 2, extra.stage = 3, extra.sp = true, extra.recompute = 2, extra.offload_activations = true;
    extra.offload_optimizer = true;
    cases.push_back(extra);


    for (const TpCase& c : cases) {
        TpResult r = run_case(c);
        std::string name = c.name();
        const TpResult& want = c.micro_steps > 1 ? ref_accum : ref;
        double loss_gap = 0;
        for (int s = 0; s < STEPS && s < (int)r.losses.size(); s++)
            loss_gap = std::max(loss_gap, std::fabs(r.losses[s] - want.losses[s]) / std::fabs(want.losses[s]));
        EXPECT(r.losses.size() == want.losses.size() && loss_gap <= 1e-5, "%s: losses differ by %.3g (relative)",
               name.c_str(), loss_gap);
        double gap = params_gap(r, want, name);
        printf("%-44s losses within %.2g, parameters within %.2g of one rank\n", name.c_str(), loss_gap, gap);
    }
    // ZeRO-R Pa: -r 2 keeps 1/t of each saved layer input (on the device, or the
    // host with offload) and gathers it before recomputing the layer. Four layers,
    // so that the two device buffers of layer outputs are reused and a layer's
    // input must really come back from what was kept. Recomputation repeats the
    // forward's arithmetic, so the run equals the same grid without it to the bit.
    for (int t : {2, 4})
        for (bool offload : {false, true}) {
            TpCase plain;
            plain.model = TINY_4_LAYERS, plain.t = t, plain.d = 2, plain.stage = 2 + offload;
            TpCase pa = plain;
            pa.recompute = 2, pa.offload_activations = offload;
            TpResult a = run_case(pa), b = run_case(plain);
            size_t differ = a.losses == b.losses ? 0 : 1;
            for (size_t u = 0; u < a.units.size(); u++) differ += a.units[u] != b.units[u];
            EXPECT(differ == 0, "%s: differs from the same grid without recomputation (%zu units)",
                   pa.name().c_str(), differ);
            printf("%-44s equals the same grid without recomputation: %s\n", pa.name().c_str(),
                   differ == 0 ? "yes" : "no");
        }

    // Pa+cpu: the host holds 1/t of the saved layer outputs of the same run without tensor parallelism
    for (int t : {1, 2, 4}) {
        TpCase c;
        c.t = t, c.d = 1, c.stage = 1, c.recompute = 2, c.offload_activations = true;
        TpResult r = run_case(c);
        if (t == 1) {
            pa_reference = r.host_activations;
            continue;
        }
        EXPECT(r.host_activations * t == pa_reference && pa_reference > 0,
               "t=%d: %zu host bytes of saved layer inputs per rank, 1/t of %zu expected", t, r.host_activations,
               pa_reference);
        printf("Pa+cpu t=%d: %zu host bytes of saved layer inputs per rank (t=1: %zu)\n", t, r.host_activations,
               pa_reference);
    }
    return test_summary("tensor_parallel");
}

// Pipeline parallelism in process, with emulated ranks: every rank of a
// dp x tp x pp grid runs its stage's engine, model and schedule
// (zero/pipeline/stage_runner.h) for a few steps of a small GPT-2, and
//   * the losses and the final parameters equal --pp 1's with the same data
//     and tensor ranks bit for bit, in fp32 and bf16, for P 2 and 4, both
//     schedules, ZeRO 0-3, with and without tp (and sp, offload, recompute,
//     Pa): a pipeline changes where a layer runs, not its arithmetic, and the
//     tied embeddings' two gradients meet in the same order at every P
//     (zero/engine/zero_engine.h);
//   * the tied embeddings' two copies (first and last stage) have the same
//     parameters, fp32 masters and Adam moments, to the bit, after every run
//     (30 steps for two of them);
//   * grids of the same world size with another dp or tp agree within 1e-5
//     (not to the bit: a different dp sums a batch's rows in other partial
//     sums, a different tp splits the GEMMs' inner sums);
//   * each stage's point-to-point bytes per step: per boundary m activations
//     forward and m gradients back, B*T*C each (B*T/t rows under sp), plus the
//     tied embeddings' exchange at ZeRO 2-3 (the head's wte gradient to the
//     first stage, its reduced slice back) or their all-reduce at 0-1;
//   * each stage's data-parallel bytes: ZeRO's formulas on its own units, less
//     what the tied unit does not move (zero_engine.h);
//   * the memory predictor equals the accountant at every phase on every
//     stage, and a stage holds min(P-s, m) micro-batches' activations (1F1B)
//     or m (GPipe).
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
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
#include "zero/pipeline/stage_runner.h"

#ifdef _OPENMP
#include <omp.h>
#endif

struct PpCase {
    int d = 1, t = 1, P = 1, stage = 1, micro_steps = 4, steps = 3;
    bool gpipe = false, sp = false, bf16 = false;
    int recompute = 0;
    bool offload_optimizer = false, offload_param = false, offload_activations = false;
    std::string layers;  // --pp_layers
    std::string name() const {
        char buf[160];
        snprintf(buf, sizeof(buf), "d=%d t=%d%s P=%d%s%s z%d A%d r%d%s%s%s%s%s", d, t, sp ? " sp" : "", P,
                 P > 1 ? (gpipe ? " gpipe" : " 1f1b") : "", layers.empty() ? "" : (" " + layers).c_str(), stage,
                 micro_steps, recompute, offload_optimizer ? " offopt" : "", offload_param ? " offparam" : "",
                 offload_activations ? " offacts" : "", bf16 ? " bf16" : "",
                 steps != 3 ? (" " + std::to_string(steps) + " steps").c_str() : "");
        return buf;
    }
};

struct PpResult {
    std::vector<double> losses;
    std::vector<std::vector<float>> units;  // the whole model's units (compute-dtype values as floats)
};

constexpr int SEQS = 4, SEQ = 32;  // SEQS sequences of SEQ tokens per micro-step, over the dp ranks
static const char* const MODEL = TINY_4_LAYERS;

template <typename T>
static PpResult run_case(const PpCase& c) {
    const GPT2Config cfg = gpt2_config_from_descriptor(MODEL);
    const int d = c.d, t = c.t, P = c.P, N = d * t * P, B = SEQS / d, A = c.micro_steps;
    const int C = cfg.channels, V = cfg.vocab_size, L = cfg.num_layers;
    const double s = sizeof(T);
    const std::string name = c.name();
    const PipelinePlan plan = make_pipeline_plan(L, P, c.layers);
    const PipelineSchedule kind = c.gpipe ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
    const ParamLayout whole(cfg, 1);
    PpResult result;
    // parts[tp][g]: unit g of the whole model with tensor rank tp's part placed in it
    std::vector<std::vector<std::vector<float>>> parts(t, std::vector<std::vector<float>>(whole.num_units()));
    // the tied unit's state on the first and on the last stage, per (dp, tp): params, master, m, v
    std::map<std::pair<int, int>, std::vector<float>> tied_first, tied_last;
    std::mutex mu;

    run_emulated_ranks(N, [&](int rank, EmulatedWorld& shared) {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        KernelCtx comm_ctx;
        EmulatedComm world(shared, rank, comm_ctx);
        const Grid3 grid{d, t, P};
        const int st = grid.stage(rank), dp = grid.dp_rank(rank), tp = grid.tp_rank(rank);
        std::unique_ptr<Comm> tensor, data, pipe, tied;
        if (t > 1) tensor = world.split(rank / t, tp);
        if (t > 1 || P > 1) data = world.split(st * t + tp, dp);
        if (P > 1) {
            const bool end = st == 0 || st == P - 1;
            pipe = world.split(dp * t + tp, st);
            tied = world.split(end ? dp * t + tp : N + rank, st);
            if (!end) tied.reset();
        }
        Comm& dpc = data ? *data : world;
        MemoryAccountant mem(rank);
        KernelCtx ctx = create_kernel_ctx(mem, (size_t)B * SEQ, C, cfg.num_heads);
        ParamLayout layout(cfg, t, P > 1 ? plan.range(st) : StageRange{});
        ZeroConfig zc;
        zc.stage = c.stage, zc.micro_steps = A, zc.seed = 5;
        zc.offload.states = c.offload_optimizer ? StateHome::Host : StateHome::Device;
        zc.offload.params = c.offload_param ? ParamHome::Host : ParamHome::Device;
        {
            ZeroEngine<T> zero(layout, dpc, mem, ctx, zc, tensor.get(), pipe.get(), tied.get());
            EXPECT(zero.grid_rank == rank, "%s: rank %d (stage %d, data rank %d, tensor rank %d) names itself %d", name.c_str(),
                   rank, st, dp, tp, zero.grid_rank);  // (NVMe offload's file and messages)
            const int slots = P > 1 ? PipelineStage<T>::activation_slots(kind, P, st, A) : 1;
            GPT2<T> model(zero, B, SEQ, c.recompute, c.offload_activations, mem, c.sp, slots);
            std::unique_ptr<PipelineStage<T>> runner;
            if (P > 1) runner = std::make_unique<PipelineStage<T>>(model, *pipe, kind, A);
            zero.init_parameters(1337);
            OptimizerConfig oc;
            oc.beta1 = 0.9f, oc.beta2 = 0.95f, oc.eps = 1e-8f, oc.weight_decay = 0.1f, oc.grad_clip = 1.0f;

            MemoryQuery q;
            q.cfg = cfg, q.stage = c.stage, q.world = d, q.tp = t, q.sp = c.sp, q.dtype_bytes = sizeof(T);
            q.micro_batch = B, q.seq_len = SEQ, q.recompute = c.recompute, q.micro_steps = A;
            q.offload_optimizer = c.offload_optimizer, q.offload_param = c.offload_param;
            q.offload_activations = c.offload_activations;
            if (P > 1) q.pp_stage = plan.range(st);
            q.gpipe = c.gpipe;
            MemoryPrediction pred = predict_memory(q, SHARD_ALIGN);
            const int want_slots = P == 1 ? 1 : c.gpipe ? A : std::min(P - st, A);
            EXPECT(model.acts.slots == want_slots && q.in_flight() == want_slots,
                   "%s stage %d: %d activation slots (predictor %d), want %d", name.c_str(), st, model.acts.slots,
                   q.in_flight(), want_slots);

            std::vector<MicroBatch> mbs(A);
            const float dloss = 1.0f / (SEQS * SEQ * A);
            for (int step = 0; step < c.steps; step++) {
                world.stats = dpc.stats = CommStats{};
                for (Comm* g : {tensor.get(), pipe.get(), tied.get()})
                    if (g) g->stats = CommStats{};
                for (int micro = 0; micro < A; micro++)
                    fill_synthetic_batch(mbs[micro].inputs, mbs[micro].targets, step, micro, dp * B, B, SEQ, V);
                MemCounts live_fwd, live_bwd;
                if (runner) {
                    runner->train(mbs, B, SEQ, dloss);
                    live_fwd = runner->live_after_forward, live_bwd = runner->live_after_backward;
                } else {
                    for (int micro = 0; micro < A; micro++) {
                        model.forward(mbs[micro].inputs.data(), mbs[micro].targets.data(), B, SEQ, dloss);
                        model.add_losses(micro == 0);
                        live_fwd = mem.live_bytes();
                        model.backward(micro);
                        live_bwd = mem.live_bytes();
                    }
                }
                zero.step(3e-4f, oc, 1.0f);
                stream_sync(ctx.stream);
                double loss = model.last ? dpc.sum_scalar(model.read_loss_sum(true)) : 0.0;
                MemCounts live_step = mem.live_bytes();  // (as the trainer: after the loss is read back)
                if (pipe) loss = pipe->sum_scalar(loss);
                if (rank == 0) result.losses.push_back(loss / ((double)SEQS * SEQ * A));
                if (step != c.steps - 1) continue;

                // memory: the predictor against the accountant, every arena and phase
                const std::string who = name + " rank " + std::to_string(rank) + " (stage " + std::to_string(st) + ")";
                expect_memory_as_predicted(mem.reserved_bytes(), live_fwd, live_bwd, live_step, pred, who);
                // data-parallel bytes: ZeRO's formulas on the stage's units (see the header)
                ShardPlan sp(layout.unit_specs(), d, SHARD_ALIGN);
                const double psi = (double)sp.full_numel, P0 = layout.has_embed() ? (double)sp.padded[0] : 0.0;
                const bool tied_end = P > 1 && layout.has_embed();
                double elems = c.stage < 2    ? 2 * psi
                               : c.stage == 2 ? (A + 1) * psi - (layout.head_copy() ? A * P0 : 0)
                                              : 3.0 * A * psi - (tied_end ? A * P0 : 0);
                double want_dp = elems * (d - 1) / d * s;
                EXPECT((double)dpc.stats.bulk_sent() == want_dp && (double)dpc.stats.bulk_recv() == want_dp,
                       "%s rank %d (stage %d): data-parallel bytes %llu sent, %llu received, formula %.0f", name.c_str(),
                       rank, st, (unsigned long long)dpc.stats.bulk_sent(), (unsigned long long)dpc.stats.bulk_recv(),
                       want_dp);
                if (pipe) {  // point-to-point: the boundaries, and the tied embeddings at ZeRO 2-3
                    const double act = (c.sp ? (double)B * SEQ / t : (double)B * SEQ) * C * s;
                    const int neighbours = (st > 0) + (st < P - 1);
                    double sent = neighbours * A * act, recv = sent;
                    const double wte = (double)layout.numel(WTE) * s, slice = (double)sp.slice_numel(0) * s;
                    if (c.stage >= 2 && st == 0) sent += slice, recv += wte;
                    if (c.stage >= 2 && st == P - 1) sent += wte, recv += slice;
                    const CommStats& ps = pipe->stats;
                    EXPECT((double)ps.sent[(int)CommOp::PointToPoint] == sent &&
                               (double)ps.recv[(int)CommOp::PointToPoint] == recv && ps.bulk_sent() == ps.sent[(int)CommOp::PointToPoint],
                           "%s rank %d (stage %d): point-to-point %llu sent, %llu received, formula %.0f and %.0f",
                           name.c_str(), rank, st, (unsigned long long)ps.sent[(int)CommOp::PointToPoint],
                           (unsigned long long)ps.recv[(int)CommOp::PointToPoint], sent, recv);
                    double tied_ar = tied && c.stage < 2 ? P0 * s : 0;  // a 2-rank all-reduce: P0 each way
                    EXPECT(!tied || (double)tied->stats.bulk_sent() == tied_ar,
                           "%s rank %d (stage %d): tied all-reduce %llu bytes, formula %.0f", name.c_str(), rank, st,
                           (unsigned long long)tied->stats.bulk_sent(), tied_ar);
                }
            }
            // the final parameters: every stage exports its units; data rank 0 keeps them
            for (int u = 0; u < layout.num_units(); u++) {
                const T* unit = zero.acquire_params_for_export(u);
                std::vector<T> local(layout.unit_spec(u).numel);
                zero.copy_to_host(local.data(), unit, local.size() * sizeof(T));
                zero.release_params_after_export(u);
                if (dp != 0) continue;
                std::vector<float> lf(local.size());
                for (size_t i = 0; i < local.size(); i++) lf[i] = to_float(local[i]);
                const int g = layout.global_unit(u);
                std::lock_guard<std::mutex> lock(mu);
                if (u == layout.embed_unit() && P > 1) (st == 0 ? tied_first : tied_last)[{dp, tp}] = lf;
                if (layout.head_copy() && u == layout.embed_unit()) continue;
                parts[tp][g].assign(whole.unit_spec(g).numel, NAN);
                layout.tp_place_unit(tp, u, lf.data(), parts[tp][g].data());
            }
            if (P > 1 && layout.has_embed()) {  // the tied unit's optimizer state, this rank's part of it
                size_t n = c.stage == 0 ? zero.plan.padded[0] : zero.plan.slice_numel(0);
                const size_t all = zero.optimizer_numel();  // unit 0 comes first
                std::vector<float> w(all), m(all), v(all), state;
                zero.read_states(w.data(), m.data(), v.data());
                for (const std::vector<float>* a : {&w, &m, &v}) state.insert(state.end(), a->begin(), a->begin() + n);
                std::lock_guard<std::mutex> lock(mu);
                auto& to = (st == 0 ? tied_first : tied_last)[{-1 - dp, tp}];
                to = state;
            }
        }
        destroy_kernel_ctx(ctx);
    });

    // the two copies of the tied embeddings
    size_t pairs = 0;
    for (auto& [key, first] : tied_first) {
        auto it = tied_last.find(key);
        bool same = it != tied_last.end() && it->second.size() == first.size() &&
                    memcmp(it->second.data(), first.data(), first.size() * sizeof(float)) == 0;
        EXPECT(same, "%s: the tied embeddings' %s differ between the first and last stage (dp %d, tp %d)",
               name.c_str(), key.first < 0 ? "optimizer state" : "parameters", key.first < 0 ? -1 - key.first : key.first,
               key.second);
        pairs++;
    }
    EXPECT(P == 1 || pairs == tied_last.size(), "%s: %zu tied copies compared, %zu on the last stage", name.c_str(),
           pairs, tied_last.size());
    // the tensor ranks' parts merged into the whole model
    ParamLayout local(cfg, t);
    for (int g = 0; g < whole.num_units(); g++) {
        std::vector<float> full(whole.unit_spec(g).numel, 0.0f);
        for (int p = 0; p < t; p++)
            local.for_each_tp_run(p, g, [&](size_t, size_t fo, size_t n) {
                for (size_t i = 0; i < n; i++) full[fo + i] = parts[p][g][fo + i];
            });
        result.units.push_back(full);
    }
    return result;
}

static PpResult run_any(const PpCase& c) { return c.bf16 ? run_case<bf16>(c) : run_case<float>(c); }

static bool bit_identical(const PpResult& a, const PpResult& b) {
    if (a.losses != b.losses || a.units.size() != b.units.size() || a.losses.empty()) return false;
    for (size_t u = 0; u < a.units.size(); u++)
        if (a.units[u].size() != b.units[u].size() ||
            memcmp(a.units[u].data(), b.units[u].data(), a.units[u].size() * sizeof(float)) != 0)
            return false;
    return true;
}

static double params_gap(const PpResult& a, const PpResult& ref) {
    double n2 = 0, d2 = 0;
    for (size_t u = 0; u < ref.units.size() && u < a.units.size(); u++)
        for (size_t i = 0; i < ref.units[u].size(); i++) {
            double r = ref.units[u][i], e = a.units[u][i] - r;
            n2 += r * r, d2 += e * e;
        }
    return std::sqrt(d2 / n2);
}

int main() {
    std::map<std::string, PpResult> refs;  // --pp 1, by everything but P and the schedule
    auto ref_for = [&](PpCase c) -> const PpResult& {
        c.P = 1, c.gpipe = false, c.layers.clear();
        std::string key = c.name();
        if (!refs.count(key)) refs[key] = run_any(c);
        return refs[key];
    };
    std::vector<PpCase> cases;
    for (int t : {1, 2})
        for (int P : {2, 4})
            for (bool gpipe : {false, true})
                for (int z = 0; z <= 3; z++) {
                    PpCase c;
                    c.t = t, c.P = P, c.gpipe = gpipe, c.stage = z;
                    cases.push_back(c);
                }
    for (int z = 0; z <= 3; z++) {  // data parallelism within each stage
        PpCase c;
        c.d = 2, c.P = 2, c.stage = z;
        cases.push_back(c);
    }
    PpCase x;
    for (int z : {1, 2}) {  // one micro-batch: no overlap, the tied sum still (and --pp 1's head and encoder in one buffer)
        x.d = 2, x.P = 2, x.stage = z, x.micro_steps = 1;
        cases.push_back(x);
    }
    x = PpCase{};
    x.P = 3, x.stage = 3, x.micro_steps = 5, x.layers = "2,1,1";  // uneven stages, m not a multiple of P
    cases.push_back(x);
    x = PpCase{};
    x.t = 2, x.sp = true, x.P = 2, x.stage = 3;
    cases.push_back(x);
    x.gpipe = true, x.stage = 1, x.d = 2, x.P = 2;
    cases.push_back(x);
    x = PpCase{};
    x.t = 2, x.P = 2, x.stage = 2, x.recompute = 2;  // Pa
    cases.push_back(x);
    x.offload_activations = true, x.offload_optimizer = true, x.stage = 3, x.offload_param = true, x.gpipe = true;
    cases.push_back(x);
    x = PpCase{};
    x.d = 2, x.P = 2, x.stage = 2, x.offload_optimizer = true, x.recompute = 1;  // host accumulation
    cases.push_back(x);
    x.stage = 1;
    cases.push_back(x);
    for (int z : {1, 3}) {
        x = PpCase{};
        x.bf16 = true, x.P = z == 1 ? 2 : 4, x.stage = z, x.d = z == 1 ? 2 : 1;
        cases.push_back(x);
    }
    // the tied copies over many steps (bf16: rounding of its own at every step), 1 and 2 data ranks
    for (int z : {0, 2}) {
        x = PpCase{};
        x.bf16 = true, x.P = 2, x.stage = z, x.d = z == 0 ? 1 : 2, x.micro_steps = 2, x.steps = 30;
        cases.push_back(x);
    }

    int same = 0;
    for (const PpCase& c : cases) {
        const PpResult& ref = ref_for(c);
        PpResult r = run_any(c);
        bool bits = bit_identical(r, ref);
        EXPECT(bits, "%s: not bit-identical to --pp 1 (params %.3g relative)", c.name().c_str(), params_gap(r, ref));
        same += bits;
        printf("%-44s %s --pp 1\n", c.name().c_str(), bits ? "bit-identical to" : "DIFFERS from");
    }
    EXPECT(refs.begin()->second.losses.back() < refs.begin()->second.losses.front(), "the reference does not train");

    // grids of 4 ranks: another dp or tp sums differently (see the header)
    PpCase g4;
    g4.d = 4, g4.stage = 1;
    PpResult four = run_any(g4);
    for (PpCase c : {PpCase{2, 1, 2, 1}, PpCase{1, 1, 4, 1}, PpCase{1, 2, 2, 1}, PpCase{2, 2, 1, 1}}) {
        PpResult r = run_any(c);
        double loss_gap = 0;
        for (size_t k = 0; k < four.losses.size(); k++)
            loss_gap = std::max(loss_gap, std::fabs(r.losses[k] / four.losses[k] - 1));
        double gap = params_gap(r, four);
        EXPECT(loss_gap <= 1e-5 && gap <= 1e-5, "%s: losses %.3g, parameters %.3g from d=4's", c.name().c_str(),
               loss_gap, gap);
        printf("%-44s within %.2g (losses) and %.2g (parameters) of d=4 t=1 P=1\n", c.name().c_str(), loss_gap, gap);
    }
    printf("%d of %zu grids bit-identical to --pp 1\n", same, cases.size());
    return test_summary("pipeline");
}

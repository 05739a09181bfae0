// The pipeline's pure parts, against independent checks:
//   * the schedule generator (zero/pipeline/schedule.h) against a reference
//     implementation of the rules, written as the policy a stage follows rather
//     than as lists: run a backward when one is ready and the stage holds its
//     limit of micro-batches (1F1B: min(P-s, m); GPipe: m) or has no forward
//     left, else the next forward. Stepped slot by slot across all stages, it
//     also proves the lists can run: each micro-batch's F before its B on a
//     stage, F on s after F on s-1, B on s after B on s+1;
//   * in flight per stage: 1F1B min(P-s, m), GPipe m;
//   * the timeline: with equal slots the bubble is (P-1)/(m+P-1) exactly (F = B
//     and B = 2F), for either schedule; a slower stage makes it larger;
//   * the partition and the grid: even splits, --pp_layers and its refusals,
//     rank = (stage*dp + dp)*tp + tp, and a stage's layout: its units are the
//     whole model's (the same specs, padding and slices under the same data
//     plan), each layer on exactly one stage, the embeddings on the first and
//     (the tied copy) the last.
#include <cstdio>
#include <string>
#include <vector>

#include "test/model_shapes.h"
#include "test/test_util.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/pipeline_plan.h"
#include "zero/layout/shard_plan.h"
#include "zero/pipeline/schedule.h"

// The reference: every stage follows the policy above; a slot runs when its
// input is there (the stage before finished that micro-batch's forward, the
// stage after its backward). One slot per stage per round, so the rounds are
// the unit-time timeline. Returns the per-stage lists, or empty on a deadlock.
static std::vector<StageSlots> reference_schedule(bool gpipe, int P, int m) {
    std::vector<StageSlots> out(P);
    std::vector<std::vector<int>> fdone(P, std::vector<int>(m, 0)), bdone(P, std::vector<int>(m, 0));
    std::vector<int> nf(P, 0), nb(P, 0);  // forwards and backwards run, per stage
    for (int round = 0; round < 4 * (m + P) + 8; round++) {
        bool all = true;
        std::vector<PipeSlot> now(P, PipeSlot{-1, false});
        for (int s = 0; s < P; s++) {
            if (nb[s] == m) continue;
            all = false;
            int limit = gpipe ? m : std::min(P - s, m);
            bool b_ready = nb[s] < nf[s] && (s == P - 1 || bdone[s + 1][nb[s]]);
            bool f_ready = nf[s] < m && (s == 0 || fdone[s - 1][nf[s]]);
            bool must_b = nf[s] - nb[s] >= limit || nf[s] == m;
            if (must_b) {
                if (b_ready) now[s] = {nb[s], true};
            } else if (f_ready) {
                now[s] = {nf[s], false};
            }
        }
        if (all) return out;
        for (int s = 0; s < P; s++) {  // the round's slots complete together
            if (now[s].micro < 0) continue;
            out[s].push_back(now[s]);
            if (now[s].backward) bdone[s][nb[s]++] = 1;
            else fdone[s][nf[s]++] = 1;
        }
    }
    return {};
}

static std::string text(const StageSlots& v) {
    std::string t;
    for (const PipeSlot& x : v) t += std::string(x.backward ? " B" : " F") + std::to_string(x.micro);
    return t;
}

static void check_schedules() {
    int checked = 0;
    for (bool gpipe : {false, true})
        for (int P = 1; P <= 8; P++)
            for (int m = 1; m <= 12; m++) {
                PipelineSchedule kind = gpipe ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
                std::vector<StageSlots> got = pipeline_schedule(kind, P, m), want = reference_schedule(gpipe, P, m);
                EXPECT(!want.empty(), "the reference deadlocks at P=%d m=%d", P, m);
                for (int s = 0; s < P && !want.empty(); s++) {
                    EXPECT(got[s] == want[s], "%s P=%d m=%d stage %d:\n  generated%s\n  reference%s",
                           pipeline_schedule_name(kind), P, m, s, text(got[s]).c_str(), text(want[s]).c_str());
                    int limit = gpipe ? m : std::min(P - s, m);
                    EXPECT(in_flight_peak(got[s]) == limit, "%s P=%d m=%d stage %d: %d in flight, want %d",
                           pipeline_schedule_name(kind), P, m, s, in_flight_peak(got[s]), limit);
                    // each micro-batch's forward once, then its backward once
                    std::vector<int> f(m, -1), b(m, -1);
                    for (size_t k = 0; k < got[s].size(); k++) (got[s][k].backward ? b : f)[got[s][k].micro] = (int)k;
                    bool ok = got[s].size() == 2 * (size_t)m;
                    for (int i = 0; i < m; i++) ok = ok && f[i] >= 0 && b[i] > f[i];
                    EXPECT(ok, "%s P=%d m=%d stage %d: not each micro-batch's F then its B:%s",
                           pipeline_schedule_name(kind), P, m, s, text(got[s]).c_str());
                }
                // the timeline honours the dependencies across stages
                std::vector<std::vector<double>> unit(P);
                for (int s = 0; s < P; s++) unit[s].assign(got[s].size(), 1.0);
                std::vector<std::vector<SlotSpan>> span = pipeline_timeline(got, unit);
                bool deps = !span.empty();
                for (int s = 0; deps && s < P; s++)
                    for (size_t k = 0; k < got[s].size(); k++) {
                        const PipeSlot& x = got[s][k];
                        int from = x.backward ? s + 1 : s - 1;
                        if (from < 0 || from >= P) continue;
                        for (size_t j = 0; j < got[from].size(); j++)
                            if (got[from][j] == x) deps = deps && span[from][j].end <= span[s][k].start;
                    }
                EXPECT(deps, "%s P=%d m=%d: a slot starts before its input exists", pipeline_schedule_name(kind), P, m);
                checked++;
            }
    printf("schedules: %d (kind, P, m) equal the reference and run\n", checked);
}

static void check_bubble() {
    for (PipelineSchedule kind : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
        for (int P : {1, 2, 4, 8})
            for (int m : {1, 2, 3, 4, 8, 16}) {
                std::vector<StageSlots> sched = pipeline_schedule(kind, P, m);
                for (double bf : {1.0, 2.0}) {  // a backward as long as a forward, and twice as long
                    std::vector<std::vector<double>> d(P);
                    for (int s = 0; s < P; s++)
                        for (const PipeSlot& x : sched[s]) d[s].push_back(x.backward ? bf : 1.0);
                    double got = timeline_bubble(pipeline_timeline(sched, d));
                    EXPECT(std::fabs(got - pipeline_bubble_formula(P, m)) < 1e-12,
                           "%s P=%d m=%d B=%gF: bubble %.6f, formula %.6f", pipeline_schedule_name(kind), P, m, bf, got,
                           pipeline_bubble_formula(P, m));
                }
                if (P > 1 && m > 1) {  // the last stage twice as slow: more idle time than the formula
                    std::vector<std::vector<double>> d(P);
                    for (int s = 0; s < P; s++) d[s].assign(sched[s].size(), s == P - 1 ? 2.0 : 1.0);
                    double got = timeline_bubble(pipeline_timeline(sched, d));
                    EXPECT(got > pipeline_bubble_formula(P, m) + 1e-9, "%s P=%d m=%d: unequal stages, bubble %.4f",
                           pipeline_schedule_name(kind), P, m, got);
                }
            }
    // lists that can and cannot run: stage 1 taking micro-batch 1 before 0 can;
    // stage 0 waiting for micro-batch 0's gradient before sending its forward cannot
    std::vector<StageSlots> odd = pipeline_schedule(PipelineSchedule::GPipe, 2, 2);
    std::swap(odd[1][0], odd[1][1]);
    std::vector<std::vector<double>> d = {{1, 1, 1, 1}, {1, 1, 1, 1}};
    EXPECT(!pipeline_timeline(odd, d).empty(), "a reordered but runnable list was refused");
    std::vector<StageSlots> stuck = pipeline_schedule(PipelineSchedule::GPipe, 2, 2);
    stuck[0] = {{0, true}, {0, false}, {1, false}, {1, true}};
    EXPECT(pipeline_timeline(stuck, d).empty(), "a list that cannot run was laid out");
    std::string printed = pipeline_schedule_text(PipelineSchedule::OneFOneB, 4, 8);
    EXPECT(printed.find("stage 0 (3 warm-up, at most 4 in flight): F0 F1 F2 F3 B0 F4") != std::string::npos &&
               printed.find("bubble 0.273 = (P-1)/(m+P-1) = 0.273") != std::string::npos,
           "--pp_schedule_print's text:\n%s", printed.c_str());
}

static void check_partition_and_grid() {
    EXPECT(even_pipeline_plan(10, 4).text() == "3,3,2,2", "10 layers on 4 stages: %s", even_pipeline_plan(10, 4).text().c_str());
    EXPECT(even_pipeline_plan(4, 4).text() == "1,1,1,1", "4 on 4: %s", even_pipeline_plan(4, 4).text().c_str());
    PipelinePlan p = make_pipeline_plan(6, 3, "1,3,2");
    EXPECT(p.first_layer(2) == 4 && p.stage_of_layer(0) == 0 && p.stage_of_layer(3) == 1 && p.stage_of_layer(5) == 2 &&
               p.stage_of_unit(0, 6) == 0 && p.stage_of_unit(7, 6) == 2 && p.stage_of_unit(2, 6) == 1,
           "--pp_layers 1,3,2: stage arithmetic");
    struct Bad {
        int L, P;
        const char* layers;
        const char* needle;
    };
    for (Bad b : {Bad{4, 5, "", "more stages than the model's 4 layers"}, Bad{4, 0, "", "--pp must be at least 1"},
                  Bad{4, 2, "3,2", "sums to 5 layers, the model has 4"}, Bad{4, 2, "1,2,1", "gives 3 stage(s), --pp is 2"},
                  Bad{4, 2, "4,0", "every stage holds at least one layer"}, Bad{4, 2, "2,x", "expected layer counts"}}) {
        std::string err = pipeline_plan_error(b.L, b.P, b.layers);
        EXPECT(err.find(b.needle) != std::string::npos && err.find('\n') == std::string::npos,
               "L=%d --pp %d --pp_layers '%s': '%s'", b.L, b.P, b.layers, err.c_str());
    }
    EXPECT(pipeline_plan_error(4, 2, "3,1").empty() && pipeline_plan_error(4, 4, "").empty(), "good plans refused");
    EXPECT(grid3_error(12, 2, 4).find("not a multiple of --tp 2 x --pp 4") != std::string::npos &&
               grid3_error(16, 2, 4).empty(),
           "grid errors");
    // the rank order: tensor rank fastest, then data rank, then stage
    Grid3 g{3, 2, 4};
    int r = 0, bad = 0;
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 3; d++)
            for (int t = 0; t < 2; t++, r++)
                bad += g.rank_of(s, d, t) != r || g.stage(r) != s || g.dp_rank(r) != d || g.tp_rank(r) != t;
    EXPECT(bad == 0 && g.world() == 24, "Grid3: %d ranks out of order", bad);

    // a stage's layout: the whole model's units, numbered locally
    for (const char* shape : {TINY_4_LAYERS, "L=7,H=4,C=48,V=100,T=12"})
        for (int t : {1, 2})
            for (int P : {2, 3, 4}) {
                GPT2Config cfg = gpt2_config_from_descriptor(shape);
                const int L = cfg.num_layers;
                ParamLayout whole(cfg, t);
                for (int N : {1, 3}) {
                    ShardPlan wp(whole.unit_specs(), N, SHARD_ALIGN);
                    PipelinePlan plan = even_pipeline_plan(L, P);
                    std::vector<int> held(L + 2, 0);
                    for (int s = 0; s < P; s++) {
                        ParamLayout st(cfg, t, plan.range(s));
                        ShardPlan sp(st.unit_specs(), N, SHARD_ALIGN);
                        EXPECT(st.has_embed() == (s == 0 || s == P - 1) && st.head_copy() == (s == P - 1) &&
                                   (st.final_unit() >= 0) == (s == P - 1),
                               "%s P=%d stage %d: ends", shape, P, s);
                        for (int u = 0; u < st.num_units(); u++) {
                            int gu = st.global_unit(u);
                            UnitSpec a = st.unit_spec(u), b = whole.unit_spec(gu);
                            bool same = st.local_unit(gu) == u && a.numel == b.numel && a.tensors.size() == b.tensors.size() &&
                                        sp.padded[u] == wp.padded[gu];
                            for (size_t k = 0; same && k < a.tensors.size(); k++)
                                same = a.tensors[k].id == b.tensors[k].id && a.tensors[k].layer == b.tensors[k].layer &&
                                       a.tensors[k].offset_in_unit == b.tensors[k].offset_in_unit &&
                                       a.tensors[k].numel == b.tensors[k].numel;
                            EXPECT(same, "%s t=%d P=%d N=%d stage %d: unit %d is not the whole model's unit %d",
                                   shape, t, P, N, s, u, gu);
                            if (!(gu == 0 && s == P - 1 && P > 1)) held[gu]++;  // the tied copy apart
                        }
                    }
                    int wrong = 0;
                    for (int gu = 0; gu < L + 2; gu++) wrong += held[gu] != 1;
                    EXPECT(wrong == 0, "%s P=%d: %d units not on exactly one stage", shape, P, wrong);
                }
            }
}

int main() {
    check_schedules();
    check_bubble();
    check_partition_and_grid();
    return test_summary("pipeline_plan");
}

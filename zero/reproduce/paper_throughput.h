// The ZeRO paper's section 10 (throughput) from the step-time model
// (zero/perf/) on cluster profiles (zero/perf/profiles/): nobody here has 400
// V100s, so each point is a prediction from the trainer's own dry run of the
// configuration. On the V100 cluster the configurations are the paper's own
// (its artifact appendix: GPUs, model parallelism, heads and micro-batch of
// every point; GPT-2-like shapes, T 1024, fp16, every block checkpointed, the
// vocabulary padded to Megatron-LM's 51200). ZeRO is Pos+g (stage 2, or Pos:
// stage 1) with ZeRO-R's partitioned checkpoints, tensor parallelism inside a
// node; the baseline is Megatron-LM of 2019: tensor parallelism alone, stage
// 0, whole checkpoints. Before the paper, the model is held to a table it was
// never tuned to: Megatron-LM's own V100 weak scaling, with the profile's
// compute anchored at that table's one-GPU point only. TFLOP/s are counted as
// Megatron-LM counts them (megatron_flops), the convention of both papers.
//   megatron.csv/png, paper_fig2/3/4/6/7/8.csv/png (V100 cluster),
//   h100_fig2/3/4 (H100 cluster), one_gpu.csv/png (one H100, with and without offload)
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/run/predict_report.h"
#include "zero/reproduce/report.h"

struct ClusterRun {
    int L = 0, H = 0, NH = 0, V = 51200;  // the model (Megatron-LM's padded vocabulary)
    int gpus = 1, tp = 1, stage = 2;
    bool pa = true, pa_cpu = false;  // ZeRO-R's partitioned checkpoints, on the host
    bool offload = false;            // optimizer offload, and at stage 3 parameter offload (one-GPU study)
    int batch = 0;                   // the micro-batch; 0: the largest that fits
    int recompute = 2;               // every block's input checkpointed (the papers' setting)
    int micro_steps = 1;             // gradient accumulation (offload: added up on the device)
};

struct ClusterPoint {
    double params = 0, tflops = 0, tokens_per_s = 0;  // tflops: per GPU, Megatron-LM's count
    int batch = 0;                                   // 0: does not fit
};

// The trainer's flags for a point (`train_gpt2_zero ... --predict PROFILE`
// would print the same): the GPT-2-like shape, T 1024, fp16.
inline std::string cluster_flags(const ClusterRun& r, int batch) {
    const long tokens = (long)batch * 1024 * (r.gpus / r.tp) * r.micro_steps;
    std::string f = fmt("-e L=%.0f,H=%.0f,C=%.0f,V=%.0f,T=1024 -t 1024 -p fp16 -b %.0f -z %.0f -r %.0f --tp %.0f "
                        "--ranks %.0f", r.L, r.NH, r.H, r.V, batch, r.stage, r.recompute, r.tp, r.gpus);
    if (r.micro_steps > 1) f += fmt(" -d %.0f", (double)tokens);
    if (!r.pa) f += " --partition_activations 0";
    if (r.pa_cpu) f += " --offload_activations 1";
    if (r.offload) f += std::string(" --offload_optimizer cpu") + (r.stage == 3 ? " --offload_param cpu" : "") +
                        (r.micro_steps > 1 ? " --offload_grad_accum device" : "");
    return f;
}
inline MemoryQuery cluster_query(const ClusterRun& r, int batch) {
    TrainOptions o = options_from_flags(cluster_flags(r, batch));
    return make_run_setup(o).memory_query(o);
}

// Device bytes the predictor reserves for one rank, and whether that fits the profile's device.
inline double device_bytes(const MemoryQuery& q) {
    return (double)predict_memory(q, SHARD_ALIGN).reserved.total(Arena::Device);
}
inline bool fits_device(const MemoryQuery& q, const Profile& p) {
    double dev = p.memory_gib * 1073741824.0;
    return device_bytes(q) <= dev - 1073741824.0 - 0.02 * dev;
}

inline ClusterPoint cluster_point(const Profile& p, const ClusterRun& r) {
    ClusterPoint c;
    c.batch = r.batch;
    if (c.batch == 0)  // the largest that fits: double, then bisect
        for (int b = 1; b <= 1024 && fits_device(cluster_query(r, b), p); b *= 2) c.batch = b;
    if (r.batch == 0 && c.batch > 0) {
        int lo = c.batch, hi = std::min(2 * c.batch, 1024);
        while (hi - lo > 1) (fits_device(cluster_query(r, (lo + hi) / 2), p) ? lo : hi) = (lo + hi) / 2;
        c.batch = lo;
    }
    MemoryQuery q = cluster_query(r, std::max(c.batch, 1));
    c.params = (double)ParamLayout(q.cfg, 1).num_parameters();
    if (c.batch == 0 || (r.batch > 0 && !fits_device(q, p))) {
        c.batch = 0;
        return c;
    }
    TrainOptions o = options_from_flags(cluster_flags(r, c.batch));
    const StepPrediction pred = predict_run(o, make_run_setup(o), p);  // from the trainer's own dry run
    c.tokens_per_s = pred.tokens_per_s;
    c.tflops = megatron_flops(q.cfg, c.batch, 1024, r.recompute == 2) * (r.gpus / r.tp) * r.micro_steps /
               (pred.step_s * r.gpus) / 1e12;
    return c;
}

// The fewest power-of-two GPUs of tensor parallelism that hold the model at B 1 (a baseline's MP where no
// paper states it).
inline int fewest_tp(const Profile& p, ClusterRun r, int most) {
    for (r.tp = 1; r.tp <= most; r.tp *= 2) {
        if (r.H % r.tp || r.NH % r.tp) continue;
        r.gpus = r.tp;
        if (fits_device(cluster_query(r, 1), p)) return r.tp;
    }
    return 0;
}

// One figure: lines over a numeric x, a CSV of the same numbers.
struct StudySeries {
    std::string label;
    std::vector<double> x, y;
    std::vector<std::string> notes;  // per point, for the CSV (batch, MP, ...)
    void add(double px, double py, const std::string& note = "") { x.push_back(px), y.push_back(py), notes.push_back(note); }
};
using Rows = std::vector<std::vector<std::string>>;

// Writes NAME.csv and NAME.png into dir and puts the PNG in the report.
inline void write_study(const std::string& dir, Report& rep, const std::string& name, const std::string& alt,
                        const std::string& title, const std::string& xlabel, const std::string& ylabel,
                        const std::vector<StudySeries>& series, bool xlog = false) {
    CsvWriter csv(dir + "/" + name + ".csv", {"series", "x", "y", "note"});
    Chart c{.title = title, .x = {.label = xlabel, .log = xlog}, .y = {.label = ylabel}, .width = 1000,
            .legend_outside = true};
    for (size_t i = 0; i < series.size(); i++) {
        const StudySeries& s = series[i];
        bool published = s.label.rfind("paper", 0) == 0 || s.label.rfind("published", 0) == 0;
        c.lines.push_back({.label = s.label, .x = s.x, .y = s.y, .color = plot_color((int)i), .dashed = published,
                           .marker_radius = published ? 3 : 5});
        for (size_t k = 0; k < s.x.size(); k++)
            csv.row({csv_field(s.label), csv_num(s.x[k], "%.6g"), csv_num(s.y[k], "%.6g"),
                     csv_field(k < s.notes.size() ? s.notes[k] : "")});
    }
    csv.save();
    write_png(dir + "/" + name + ".png", render_chart(c));
    rep.image(name + ".png", alt);
}

// A predicted point beside a published one: "33.1 (B 24) | 30.3 | +9%".
struct Misses {
    std::vector<double> errors;  // predicted / published - 1, per point with both
    std::string cell(const ClusterPoint& c, double published) {
        if (!c.batch) return "does not fit|" + (published > 0 ? fmt("%.1f", published) : std::string("-")) + "|";
        std::string s = fmt("%.1f (B %.0f)|", c.tflops, c.batch);
        if (published <= 0) return s + "-|";
        errors.push_back(c.tflops / published - 1);
        return s + fmt("%.1f|%+.0f%%", published, 100 * errors.back());
    }
    double worst() const {
        double w = 0;
        for (double e : errors) w = std::max(w, std::fabs(e));
        return w;
    }
    std::string range() const {  // as ratios: "0.72-1.31x"
        double lo = 1e9, hi = 0;
        for (double e : errors) lo = std::min(lo, 1 + e), hi = std::max(hi, 1 + e);
        return errors.empty() ? "-" : fmt("%.2f-%.2fx", lo, hi);
    }
};
inline std::vector<std::string> split_cells(const std::string& row) {
    std::vector<std::string> c;
    size_t start = 0, bar;
    while ((bar = row.find('|', start)) != std::string::npos) c.push_back(row.substr(start, bar - start)), start = bar + 1;
    c.push_back(row.substr(start));
    return c;
}

// Megatron-LM's V100 weak scaling (arXiv 1909.08053, Table 1 and Figure 5): its 1.2B to 8.3B models on 1 to 8
// GPUs of a DGX-2H (model parallelism in the node, micro-batch 8), and each with 64-way data parallelism
// (up to 512 GPUs), as per cent of linear scaling from the one-GPU 39 TFLOP/s (the profile's anchor).
inline std::vector<StudySeries> megatron_table(const Profile& p, Rows& rows, Misses& miss) {
    struct M { int L, H, NH, mp; double model_parallel, with_data; };
    const M models[] = {{.L = 40, .H = 1536, .NH = 16, .mp = 1, .model_parallel = 100, .with_data = 96},
                        {.L = 54, .H = 1920, .NH = 20, .mp = 2, .model_parallel = 95, .with_data = 83},
                        {.L = 64, .H = 2304, .NH = 24, .mp = 4, .model_parallel = 82, .with_data = 79},
                        {.L = 72, .H = 3072, .NH = 32, .mp = 8, .model_parallel = 77, .with_data = 74}};
    StudySeries mp{"model parallel, predicted"}, dp{"x64 data parallel, predicted"}, pmp{"published: model parallel"},
        pdp{"published: x64 data parallel"};
    for (const M& m : models) {
        ClusterRun r{.L = m.L, .H = m.H, .NH = m.NH, .gpus = m.mp, .tp = m.mp, .stage = 0, .pa = false, .batch = 8};
        for (int data = 1; data <= 64; data *= 64) {
            r.gpus = m.mp * data;
            ClusterPoint c = cluster_point(p, r);
            const double published = 39 * (data == 1 ? m.model_parallel : m.with_data) / 100;
            (data == 1 ? mp : dp).add(r.gpus, c.tflops), (data == 1 ? pmp : pdp).add(r.gpus, published);
            std::string cells = miss.cell(c, published);
            if (data == 1 && m.mp == 1) miss.errors.pop_back(), cells += " (the anchor)";
            rows.push_back(split_cells(fmt("%.1fB|%.0f|MP %.0f x DP %.0f|", c.params / 1e9, r.gpus, m.mp, data) +
                                       cells));
        }
    }
    return {mp, dp, pmp, pdp};
}

// Figure 2: throughput per GPU vs model size, ZeRO against the baseline. On the V100 cluster the paper's
// configurations (its appendix, Table 1); elsewhere, ZeRO's MP within a node and the baseline's fewest
// GPUs that hold the model, each at the largest micro-batch that fits.
struct PaperRun { int gpus, mp, heads, batch; };
struct Figure2Model { int L, H; PaperRun zero, base; double paper_zero, paper_base; };  // TFLOP/s read from Figure 2
inline std::vector<Figure2Model> figure2_models() {
    return {{.L = 48, .H = 1600, .zero = {400, 1, 16, 24}, .base = {400, 2, 16, 16}, .paper_zero = 30.3, .paper_base = 26.4},
            {.L = 72, .H = 3072, .zero = {400, 4, 24, 64}, .base = {400, 8, 24, 8}, .paper_zero = 36.9, .paper_base = 23.1},
            {.L = 88, .H = 6144, .zero = {400, 4, 32, 12}, .base = {384, 32, 64, 4}, .paper_zero = 35.9, .paper_base = 4.9},
            {.L = 132, .H = 6144, .zero = {400, 16, 32, 64}, .base = {384, 64, 64, 4}, .paper_zero = 36.5, .paper_base = 6.2},
            {.L = 100, .H = 8192, .zero = {400, 16, 64, 32}, .base = {384, 128, 128, 4}, .paper_zero = 37.6, .paper_base = 5.2},
            {.L = 125, .H = 8192, .zero = {400, 16, 64, 32}, .base = {384, 128, 128, 2}, .paper_zero = 38.7, .paper_base = 3.7},
            {.L = 150, .H = 8192, .zero = {400, 16, 64, 24}, .base = {384, 128, 128, 2}, .paper_zero = 28.2, .paper_base = 3.7},
            {.L = 175, .H = 8192, .zero = {400, 16, 64, 16}, .base = {384, 128, 128, 2}, .paper_zero = 26.9, .paper_base = 3.8},
            {.L = 212, .H = 8192, .zero = {400, 16, 64, 12}, .base = {256, 256, 256, 2}, .paper_zero = 21.0, .paper_base = 2.2}};
}

// make reproduce's stage3_trace.json: Figure 2's first configuration at ZeRO stage 3.
inline ClusterRun stage3_trace_run() {
    const Figure2Model m = figure2_models()[0];
    return {.L = m.L, .H = m.H, .NH = m.zero.heads, .gpus = m.zero.gpus, .tp = m.zero.mp, .stage = 3, .batch = m.zero.batch};
}

inline std::vector<StudySeries> figure2(const Profile& p, bool paper, Rows& rows, Misses& zmiss, Misses& bmiss) {
    StudySeries zero{"ZeRO (Pos+g, Pa, MP in the node)"}, base{"baseline (MP alone)"}, pz{"paper: ZeRO"},
        pb{"paper: baseline"};
    for (const Figure2Model& m : figure2_models()) {
        ClusterRun z{.L = m.L, .H = m.H, .NH = m.zero.heads};  // ZeRO: stage 2
        ClusterRun b = z;
        b.stage = 0, b.pa = false, b.NH = m.base.heads;
        if (paper) {
            z.gpus = m.zero.gpus, z.tp = m.zero.mp, z.batch = m.zero.batch;
            b.gpus = m.base.gpus, b.tp = m.base.mp, b.batch = m.base.batch;
        } else {
            z.tp = std::min(m.zero.mp, p.devices_per_node), z.gpus = 400 / z.tp * z.tp;
            b.tp = fewest_tp(p, b, 256), b.gpus = b.tp ? 400 / b.tp * b.tp : 0;
        }
        ClusterPoint zp = cluster_point(p, z), bp = b.tp ? cluster_point(p, b) : ClusterPoint{};
        if (!zp.batch && paper) z.pa_cpu = true, zp = cluster_point(p, z);  // "Pa+cpu ... only when it is beneficial"
        const double x = zp.params / 1e9;
        if (zp.batch) zero.add(x, zp.tflops, fmt("MP %.0f, B %.0f", z.tp, zp.batch) + (z.pa_cpu ? ", Pa+cpu" : ""));
        if (bp.batch) base.add(x, bp.tflops, fmt("MP %.0f, B %.0f", b.tp, bp.batch));
        pz.add(x, m.paper_zero), pb.add(x, m.paper_base);
        rows.push_back(split_cells(fmt("%.3gB|%.0f (MP %.0f", x, z.gpus, z.tp) + (z.pa_cpu ? ", Pa+cpu)" : ")") + "|" +
                                   zmiss.cell(zp, paper ? m.paper_zero : 0) + fmt("|%.0f (MP %.0f)|", b.gpus, b.tp) +
                                   bmiss.cell(bp, paper ? m.paper_base : 0)));
    }
    if (paper) return {zero, base, pz, pb};
    return {zero, base};
}

// Figure 3: a 60B model (75 x 8192, 32 heads, MP 16) from 64 to 400 GPUs, per GPU and in all, against linear
// scaling from 64; on the V100 cluster at the paper's micro-batches (its appendix, Table 2).
inline std::vector<StudySeries> figure3(const Profile& p, bool paper, Rows& rows, Misses& miss) {
    StudySeries total{"ZeRO: all GPUs (TFLOP/s / 10)"}, per{"ZeRO: per GPU"}, linear{"linear from 64 GPUs (/ 10)"},
        published{"paper: per GPU"};
    const int gpus[4] = {64, 128, 256, 400}, paper_batch[4] = {16, 48, 48, 64};
    const double paper_per[4] = {25.6, 37.6, 39.0, 36.5};
    double first = 0;
    for (int i = 0; i < 4; i++) {
        ClusterRun r{.L = 75, .H = 8192, .NH = 32, .gpus = gpus[i], .tp = std::min(16, p.devices_per_node),
                     .batch = paper ? paper_batch[i] : 0};
        ClusterPoint c = cluster_point(p, r);
        if (c.batch && first == 0) first = c.tflops;
        if (c.batch) {
            per.add(gpus[i], c.tflops, fmt("B %.0f", c.batch)), total.add(gpus[i], c.tflops * gpus[i] / 10);
            linear.add(gpus[i], first * gpus[i] / 10);
        }
        published.add(gpus[i], paper_per[i]);
        rows.push_back(split_cells(fmt("%.0f", gpus[i]) + "|" + miss.cell(c, paper ? paper_per[i] : 0) + "|" +
                                   (c.batch ? fmt("%.0f|%.2f", c.tflops * gpus[i], c.tflops / first) : "|")));
    }
    if (paper) return {per, total, linear, published};
    return {per, total, linear};
}

// Figure 4: no model parallelism on 128 GPUs: ZeRO (Pos+g) against data parallelism alone (stage 0); on
// the V100 cluster the paper's models and micro-batches (its appendix, Table 6).
inline std::vector<StudySeries> figure4(const Profile& p, bool paper, Rows& rows, Misses& miss) {
    struct M { int L, H, NH, batch, stage; double published; };
    const M models[] = {{.L = 24, .H = 1920, .NH = 16, .batch = 8, .stage = 0, .published = 39.3},
                        {.L = 40, .H = 1536, .NH = 16, .batch = 1, .stage = 0, .published = 18.0},
                        {.L = 34, .H = 1920, .NH = 16, .batch = 24, .stage = 2, .published = 40.4},
                        {.L = 54, .H = 1920, .NH = 16, .batch = 24, .stage = 2, .published = 42.0},
                        {.L = 64, .H = 2304, .NH = 24, .batch = 16, .stage = 2, .published = 43.6},
                        {.L = 52, .H = 3072, .NH = 24, .batch = 12, .stage = 2, .published = 47.0},
                        {.L = 72, .H = 3072, .NH = 24, .batch = 8, .stage = 2, .published = 47.0},
                        {.L = 50, .H = 4096, .NH = 32, .batch = 6, .stage = 2, .published = 41.2},
                        {.L = 54, .H = 4096, .NH = 32, .batch = 4, .stage = 2, .published = 35.8},
                        {.L = 58, .H = 4096, .NH = 32, .batch = 4, .stage = 2, .published = 33.0},
                        {.L = 62, .H = 4096, .NH = 32, .batch = 2, .stage = 2, .published = 21.2}};
    StudySeries zero{"ZeRO (Pos+g)"}, dp{"data parallelism alone"}, pz{"paper: ZeRO"}, pd{"paper: data parallelism"};
    for (const M& m : models) {
        ClusterRun r{.L = m.L, .H = m.H, .NH = m.NH, .gpus = 128, .tp = 1, .stage = m.stage, .batch = paper ? m.batch : 0};
        ClusterPoint c = cluster_point(p, r);
        const double x = c.params / 1e9;
        if (c.batch) (m.stage ? zero : dp).add(x, c.tflops, fmt("B %.0f", c.batch));
        (m.stage ? pz : pd).add(x, m.published);
        rows.push_back(split_cells(fmt("%.3gB", x) + "|" + (m.stage ? "ZeRO" : "data parallel") + "|" +
                                   miss.cell(c, paper ? m.published : 0)));
    }
    if (paper) return {zero, dp, pz, pd};
    return {zero, dp};
}

// Table 3's configurations at MP 16: C1 Pos, C2 Pos+Pa, C3 Pos+g, C4 Pos+g+Pa, C5 Pos+g+Pa+cpu. (CB and MD,
// constant buffers and defragmentation, are what this trainer always does: everything allocated once.)
inline ClusterRun config_run(int c, int L, int NH, int gpus, int batch) {
    return {.L = L, .H = 8192, .NH = NH, .gpus = gpus, .tp = 16, .stage = c <= 2 ? 1 : 2, .pa = c == 2 || c >= 4,
            .pa_cpu = c == 5, .batch = batch};
}

// Figures 6-8: the largest model at batch 16, the memory of 40B and 100B, the throughput of 60B (128 GPUs, the
// paper's micro-batch per configuration) and 170B (400 GPUs, C5 at micro-batch 12; the others did not run).
inline void figures678(const Profile& p, std::vector<StudySeries>& f6, std::vector<StudySeries>& f7,
                       std::vector<StudySeries>& f8, Rows& rows, Misses& miss) {
    StudySeries size{"largest model (B), batch 16"}, psize{"paper: largest model"}, m40{"40B, batch 16: device GiB"},
        m100{"100B, batch 32: device GiB"}, p40{"paper: 40B"}, p100{"paper: 100B"}, t60{"60B on 128 GPUs"},
        t170{"170B on 400 GPUs"}, pt60{"paper: 60B"}, pt170{"paper: 170B"};
    const double paper_size[5] = {40, 60, 50, 140, 150}, paper40[5] = {29.5, 24, 25.3, 19.7, 19.6},
                 paper100[5] = {-1, -1, -1, 29.4, 26.4}, paper60[5] = {11.6, 12.1, 16.6, 34.9, 31.7};
    const int batch60[5] = {2, 4, 32, 32, 8};
    for (int c = 1; c <= 5; c++) {
        int L = 1;
        while (L < 1024 && fits_device(cluster_query(config_run(c, L + 1, 64, 400, 16), 16), p)) L++;
        double biggest = (double)ParamLayout(cluster_query(config_run(c, L, 64, 400, 16), 16).cfg, 1).num_parameters() / 1e9;
        double g40 = device_bytes(cluster_query(config_run(c, 50, 32, 400, 16), 16)) / 1073741824.0;
        double g100 = device_bytes(cluster_query(config_run(c, 125, 64, 400, 32), 32)) / 1073741824.0;
        ClusterPoint a = cluster_point(p, config_run(c, 75, 64, 128, batch60[c - 1]));
        ClusterPoint b = c == 5 ? cluster_point(p, config_run(c, 212, 64, 400, 12)) : ClusterPoint{};
        size.add(c, biggest), psize.add(c, paper_size[c - 1]), m40.add(c, g40), m100.add(c, g100);
        p40.add(c, paper40[c - 1]);
        if (paper100[c - 1] > 0) p100.add(c, paper100[c - 1]);
        if (a.batch) t60.add(c, a.tflops, fmt("B %.0f", a.batch));
        if (b.batch) t170.add(c, b.tflops, fmt("B %.0f", b.batch));
        pt60.add(c, paper60[c - 1]);
        if (c == 5) pt170.add(c, 20.8);
        rows.push_back(split_cells(fmt("C%.0f|%.0f (%.0f)|%.1f (%.1f)|%.1f", c, biggest, paper_size[c - 1], g40,
                                       paper40[c - 1], g100) +
                                   (paper100[c - 1] > 0 ? fmt(" (%.1f)", paper100[c - 1]) : std::string(" (-)")) + "|" +
                                   miss.cell(a, paper60[c - 1]) + "|" +
                                   (c == 5 ? miss.cell(b, 20.8) : std::string("did not run|-|"))));
    }
    f6 = {size, psize};
    f7 = {m40, m100, p40, p100};
    f8 = {t60, t170, pt60, pt170};
}

// One GPU: throughput against model size, with and without optimizer offload (and, past what
// that holds, parameter offload at stage 3), at the largest micro-batch that fits.
inline std::vector<StudySeries> one_gpu(const Profile& p, const std::string& runs_csv, Rows& rows, double& ratio) {
    StudySeries plain{"no offload"}, off{"optimizer offload (stage 2)"}, off3{"optimizer + parameter offload (stage 3)"};
    struct M { int L, H, NH; };
    const M models[] = {{12, 768, 12}, {24, 1024, 16}, {36, 1280, 20}, {48, 1600, 25}, {64, 2048, 16},
                        {24, 4096, 32}, {32, 4096, 32}, {40, 4096, 32}, {48, 4096, 32}, {64, 4096, 32}};
    auto cell = [](const ClusterPoint& q) {
        return q.batch ? fmt("%.0f (B %.0f, %.0f TFLOP/s)", q.tokens_per_s, q.batch, q.tflops)
                       : std::string("does not fit");
    };
    for (const M& m : models) {
        ClusterRun r{.L = m.L, .H = m.H, .NH = m.NH, .V = 50257, .gpus = 1, .tp = 1, .stage = 2};
        ClusterPoint a = cluster_point(p, r);
        r.offload = true;
        ClusterPoint b = cluster_point(p, r);
        r.stage = 3;
        ClusterPoint c = cluster_point(p, r);
        double x = (a.params ? a.params : b.params ? b.params : c.params) / 1e9;
        if (a.batch) plain.add(x, a.tokens_per_s, fmt("B %.0f", a.batch));
        if (b.batch) off.add(x, b.tokens_per_s, fmt("B %.0f", b.batch));
        if (c.batch) off3.add(x, c.tokens_per_s, fmt("B %.0f", c.batch));
        rows.push_back({fmt("%.3gB", x), cell(a), cell(b), cell(c)});
    }
    // runs measured on an H100 (profiles/h100_runs.csv: date, GPU, command), and the model at the same settings
    CsvTable runs = read_csv_table(runs_csv);
    StudySeries measured{"measured on an H100 (" + runs.text(0, "date") + ")"}, same{"predicted at those settings"};
    int plain_runs = 0;
    ratio = 0;  // predicted over measured, the runs without offload
    for (size_t i = 0; i < runs.rows.size(); i++) {
        auto n = [&](const char* c) { return runs.num(i, c); };
        ClusterRun r{.L = (int)n("layers"), .H = (int)n("channels"), .NH = (int)n("heads"), .V = 50257,
                     .stage = (int)n("stage"), .offload = n("offload") != 0, .batch = (int)n("micro_batch"),
                     .recompute = 0, .micro_steps = (int)n("micro_steps")};  // (no recomputation, as those runs)
        ClusterPoint c = cluster_point(p, r);
        std::string what = fmt("B %.0f", r.batch) + (r.micro_steps > 1 ? fmt(" x %.0f micro-steps", r.micro_steps) : "") +
                           (r.offload ? ", offload" : "");
        measured.add(c.params / 1e9, n("tokens_per_s"), what), same.add(c.params / 1e9, c.tokens_per_s, what);
        if (!r.offload) ratio += c.tokens_per_s / n("tokens_per_s"), plain_runs++;
        rows.push_back({fmt("%.3gB", c.params / 1e9) + " at " + what, "measured " + fmt("%.0f", n("tokens_per_s")),
                        "predicted " + fmt("%.0f", c.tokens_per_s), fmt("%+.0f%%", 100 * (c.tokens_per_s / n("tokens_per_s") - 1))});
    }
    ratio /= std::max(1, plain_runs);
    return {plain, off, off3, measured, same};
}

// The section of report.md, and every figure's PNG and CSV.
inline void write_paper_throughput(const std::string& dir, const std::string& profiles, Report& rep) {
    const Profile v100 = anchored_profile(load_profile(profiles + "/v100_dgx2.json")),
                  h100s = anchored_profile(load_profile(profiles + "/h100_dgx.json")),
                  h100 = anchored_profile(load_profile(profiles + "/h100.json"));
    rep.heading("Throughput: the paper's section 10, from the step-time model");
    rep.para("Nobody here has 400 V100s, so every point below is a prediction of `zero/perf/` from the trainer's "
             "own dry run of the configuration, on a cluster profile (`" + profiles + "/`). The V100 profile "
             "(`v100_dgx2.json`) is the paper's cluster and software of 2019, every number from a published "
             "measurement or specification (its `sources`): DGX-2 nodes of 16 V100 on NVSwitch (126 GB/s each way, "
             "NCCL's own model of a V100's six NVLinks), 8 x 100 Gb/s InfiniBand (97.6 GB/s per node: NCCL's "
             "developers' 12.2 GB/s per NIC), NCCL 2.4.8's latencies; matmuls at the efficiency Baidu's DeepBench "
             "measured for a V100's GEMMs of their size, the other kernels at the relative cost they have in this "
             "trainer on an H100; and all of them scaled by one factor (" + fmt("%.2f", v100.compute_scale) +
             ") so that Megatron-LM's published one-GPU run, its 1.2B GPT-2 at 39 TFLOP/s on one V100, takes its "
             "published time. The software: Megatron-LM all-reduces gradients after the backward pass, DeepSpeed "
             "0.2 reduces them on the compute stream (`overlap_comm` off by default), and its stage-2 "
             "reduce-scatter is one reduce to each rank per bucket of 5e8 elements. TFLOP/s are counted as "
             "Megatron-LM counts them (`megatron_flops`: the whole T x T attention, recomputation included), the "
             "convention of both papers. Nothing is fitted to the ZeRO paper's numbers: they are drawn dashed "
             "beside, with the error of every point.");
    Rows rows;
    Misses mega;
    rep.heading("Held out first: Megatron-LM's own V100 table", 3);
    write_study(dir, rep, "megatron", "Megatron-LM weak scaling", "Megatron-LM's V100 weak scaling: predicted and "
                "published", "GPUs", "TFLOP/s per GPU", megatron_table(v100, rows, mega), true);
    rep.para("Megatron-LM (arXiv 1909.08053, Table 1 and Figure 5) on DGX-2H V100s, micro-batch 8 per model "
             "replica, T 1024: its 1.2B model on one GPU (the anchor, 39 TFLOP/s: " + fmt("%.1f", 39 * 125.0 / 130) +
             " on the DGX-2's slower clock), 2.5B, 4.2B and 8.3B on 2, 4 and 8 GPUs of tensor parallelism in a node, "
             "and each of them 64 times over by data parallelism (up to 512 GPUs); published as per cent of linear "
             "scaling, here as TFLOP/s per GPU (39 x the per cent). The model never saw these points:");
    rep.table({"model", "GPUs", "grid", "predicted TFLOP/s per GPU", "published", "error"}, rows);
    int within = 0;
    for (double e : mega.errors) within += std::fabs(e) <= 0.10;
    rep.para(fmt("**%.0f of the %.0f held-out points within 10%%** (worst %.0f%%).", within, mega.errors.size(),
                 100 * mega.worst()) +
             " Where a point misses: the published data-parallel costs do not follow any one network bandwidth. "
             "Each node must all-reduce the whole model's fp16 gradients (2 bytes a parameter, whatever the tensor "
             "parallelism), and a ring all-reduce sends twice that through the node's NICs: the 1.2B's published "
             "drop from 100% to 96% leaves " + fmt("%.2f s", 8.63e13 / 39e12 * (100.0 / 96 - 1)) +
             " a step for it, " + fmt("%.0f GB/s", 4 * 1.2e9 / (8.63e13 / 39e12 * (100.0 / 96 - 1)) / 1e9) +
             "; the 8.3B's from 77% to 74% leaves " + fmt("%.2f s", 5.72e14 / (8 * 39e12 * 0.77) * (77.0 / 74 - 1)) +
             ", " + fmt("%.0f GB/s", 4 * 8.3e9 / (5.72e14 / (8 * 39e12 * 0.77) * (77.0 / 74 - 1)) / 1e9) +
             ", more than three times what eight 100 Gb/s NICs carry. The model keeps the NICs' measured rate for "
             "both, and so predicts the 8.3B's data parallelism dearer than published.");
    rows.clear();
    Misses z2, b2;
    rep.heading("Figure 2: ZeRO against tensor parallelism alone, 400 V100", 3);
    write_study(dir, rep, "paper_fig2", "Figure 2", "Figure 2: throughput per GPU vs model size, 400 V100 (predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", figure2(v100, true, rows, z2, b2));
    rep.para("The paper's configurations (its appendix, Table 1): ZeRO with MP 1 to 16 inside a node, the baseline "
             "with the MP it needed (32 to 256: across 2 to 16 nodes) on 400, 384 or 256 GPUs, each at the paper's "
             "micro-batch. Where ZeRO's point does not fit with Pa, it runs with Pa+cpu, as the paper says it did "
             "(\"Pa+cpu is turned on only when it is beneficial\").");
    rep.table({"model", "ZeRO GPUs", "ZeRO predicted", "paper", "error", "baseline GPUs", "baseline predicted", "paper",
               "error"}, rows);
    rep.para(fmt("ZeRO: every point within %.0f%%", 100 * z2.worst()) + " of the paper (the bar: 25%). Baseline: " +
             b2.range() + " the paper's (the bar: 2x). Where they miss: DeepSpeed 0.2's reduce-scatter as one reduce "
             "per rank is what brings the 1.5B point (400-way data parallelism: 400 reduces of 399 ring steps per "
             "bucket) down to the paper's; without it the model was 40% fast there. The 170B point needs Pa+cpu to "
             "fit at the paper's micro-batch 12, and the paper's 21 TFLOP/s asks for more time than the model finds "
             "in its kernels, collectives and host copies; the paper's own C5 run of it (Figure 8) says the same. "
             "The 40B baseline, tensor parallelism over two nodes, is where the model and the paper part most: at "
             "NCCL's ring through all eight NICs (NCCL 2.4.8 builds one ring per NIC), a 40B step needs far less "
             "than the paper's 5 TFLOP/s implies. The paper explains it as 12.5 GB/s per link: one NIC's rate, as "
             "if each group's ring used one; the model does not assume that, and NCCL 2.4.8's own tuning argues "
             "against it: for a group on two NVLink nodes it picks its tree for every all-reduce, which it rates at "
             "1.5 times a ring's bandwidth (three quarters of a ring's, doubled for two nodes: src/init.cc, "
             "ncclTreeThreshold), so that software could only have been faster than the model's rings. From 60B "
             "on, where the groups span 4 to 16 nodes, the baseline is within a third of the paper.");
    {  // Figure 2's first configuration at stage 3: its predicted step, as --trace writes one
        const ClusterRun z = stage3_trace_run();
        const TrainOptions o = options_from_flags(cluster_flags(z, z.batch));
        const RunSetup run = make_run_setup(o);
        const StepPrediction s = predict_run(o, run, v100, dir + "/stage3_trace.json");
        rep.heading("A step of stage 3, laid out", 3);
        rep.para("`stage3_trace.json`: the first model of Figure 2 (" + fmt("%.2gB", ParamLayout(run.cfg, 1).num_parameters() / 1e9) +
                 ", 400 V100, B " + fmt("%.0f", z.batch) + ") at ZeRO stage 3, one rank's predicted step (" +
                 fmt("%.3g s", s.step_s) + ") as `--trace` writes it: open it in ui.perfetto.dev or Chromium's DevTools Performance panel. "
                 "The profile's software, as the paper's, does not overlap the data group's collectives with "
                 "compute: each unit's all-gather runs on the compute stream just ahead of the unit's forward and "
                 "backward, its reduce-scatter just after its backward; the comm stream only adds up gradients.");
    }
    rows.clear();
    Misses m3;
    rep.heading("Figure 3: super-linear scaling of a 60B model", 3);
    write_study(dir, rep, "paper_fig3", "Figure 3", "Figure 3: 60B (75 x 8192, MP 16) from 64 to 400 V100 (predicted)",
                "GPUs", "TFLOP/s", figure3(v100, true, rows, m3));
    rep.table({"GPUs", "predicted per GPU", "paper", "error", "all GPUs", "per GPU / at 64"}, rows);
    rep.para("The paper's micro-batches (16, 48, 48, 64: its appendix, Table 2). The paper: \"super linear speedup "
             "in the regime of 64-400 GPUs\", from 25.6 TFLOP/s per GPU at 64 to 37.6 at 128. The model finds a step "
             "of a tenth, not a half: at MP 16 a micro-batch of 16 already gives every matmul more than 100 GFLOP, "
             "where DeepBench's V100 GEMMs run at 80-90% of peak, so a larger micro-batch buys little; and the "
             "data-parallel traffic per GPU at 64 GPUs costs a tenth of the step. What made the paper's 64-GPU "
             "run slow is not in the hardware the model knows (its memory, at 4-way data parallelism, is the "
             "fullest of the four).");
    rows.clear();
    Misses m4;
    rep.heading("Figure 4: the largest model without model parallelism", 3);
    write_study(dir, rep, "paper_fig4", "Figure 4", "Figure 4: no model parallelism, 128 V100 (predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", figure4(v100, true, rows, m4));
    rep.table({"model", "system", "predicted", "paper", "error"}, rows);
    rep.para(fmt("Every point within %.0f%%", 100 * m4.worst()) + " of the paper, at its micro-batches (its appendix, "
             "Table 6). The model follows the paper's fall at 11-13B, where the micro-batch shrinks to 4 and 2 and "
             "the fixed cost of reducing 12-25 GB of gradients per GPU over 128 ranks (DeepSpeed's reduces "
             "included) weighs on fewer FLOPs; at 13B, micro-batch 2, it falls less than the paper's.");
    rows.clear();
    Misses m8;
    std::vector<StudySeries> f6, f7, f8;
    figures678(v100, f6, f7, f8, rows, m8);
    rep.heading("Figures 6-8: configurations C1-C5 (Table 3)", 3);
    write_study(dir, rep, "paper_fig6", "Figure 6", "Figure 6: the largest model per configuration, MP 16, batch 16 "
                "(predicted)", "configuration C1..C5", "billions of parameters", f6);
    write_study(dir, rep, "paper_fig7", "Figure 7", "Figure 7: device memory of 40B and 100B per configuration "
                "(predicted)", "configuration C1..C5", "GiB per GPU (predictor's reserved bytes)", f7);
    write_study(dir, rep, "paper_fig8", "Figure 8", "Figure 8: throughput per configuration (predicted)",
                "configuration C1..C5", "TFLOP/s per GPU", f8);
    rep.para("C1 Pos, C2 Pos + Pa, C3 Pos+g, C4 Pos+g + Pa, C5 Pos+g + Pa+cpu, all at MP 16 (CB and MD, constant "
             "buffers and defragmentation, are what this trainer does anyway: everything is allocated once). The "
             "largest model and the memory are the memory predictor's (the paper's in brackets: its \"max cached\" "
             "memory includes PyTorch's allocator cache); the throughput of 60B on 128 GPUs at the paper's "
             "micro-batch per configuration (2, 4, 32, 32, 8), and of 170B at C5, micro-batch 12:");
    rep.table({"config", "largest model B (paper)", "40B GiB (paper)", "100B GiB (paper)", "60B predicted", "paper",
               "error", "170B predicted", "paper", "error"}, rows);
    rep.para("C5 is slower than C4 at 60B, as the paper says, for the paper's reason in part: its activation "
             "checkpoints go to the host and back (the model puts DeepSpeed 0.2's copies on PCIe at the measured "
             "pinned rate), and its micro-batch is 8 where C4's is 32. C1 and C2 at micro-batches 2 and 4 miss by "
             "the most: their step is mostly the fixed cost of reducing and gathering 7.5 GB of fp16 gradients "
             "and parameters per GPU, and the paper's runs spent more on it than the NICs' rate allows the model "
             "to. C3 does not fit at micro-batch 32 by this trainer's memory (the paper ran it).");
    rows.clear();
    Misses h2a, h2b, h3, h4;
    rep.heading("The same studies on an H100 cluster", 3);
    rep.para("A current cluster (`h100_dgx.json`: DGX H100 nodes of 8 H100 on NVLink 4, 8 x 400 Gb/s), this "
             "trainer's kernels as measured on an H100 and its software (communication overlapping the backward "
             "pass); the paper's shapes, ZeRO's MP at most a node, the baseline's the fewest GPUs that hold the "
             "model, each at the largest micro-batch that fits 80 GB.");
    write_study(dir, rep, "h100_fig2", "Figure 2 on H100", "Figure 2 on 400 H100 (50 DGX H100 nodes, predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", figure2(h100s, false, rows, h2a, h2b));
    rep.table({"model", "ZeRO GPUs", "ZeRO predicted", "", "", "baseline GPUs", "baseline predicted", "", ""}, rows);
    rows.clear();
    write_study(dir, rep, "h100_fig3", "Figure 3 on H100", "Figure 3 on H100: 60B, MP 8 (predicted)", "GPUs",
                "TFLOP/s", figure3(h100s, false, rows, h3));
    rep.table({"GPUs", "predicted per GPU", "", "", "all GPUs", "per GPU / at 64"}, rows);
    rows.clear();
    write_study(dir, rep, "h100_fig4", "Figure 4 on H100", "Figure 4 on 128 H100 (predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", figure4(h100s, false, rows, h4));
    rep.table({"model", "system", "predicted", "", ""}, rows);
    rows.clear();
    double ratio = 0;
    rep.heading("One GPU, with and without offload", 3);
    write_study(dir, rep, "one_gpu", "one GPU", "One H100: tokens/s vs model size, with and without offload "
                "(predicted)", "model size (billions of parameters)", "tokens/s",
                one_gpu(h100, profiles + "/h100_runs.csv", rows, ratio), true);
    rep.para("One H100 (`h100.json`), T 1024, bf16, the largest micro-batch that fits 80 GB; the last rows set runs "
             "measured on an H100 (`h100_runs.csv`) beside the model at the same settings: without offload it "
             "predicts " + fmt("%.2f", ratio) + " times what they did.");
    rep.table({"model", "no offload", "optimizer offload", "optimizer + parameter offload (stage 3)"}, rows);
}

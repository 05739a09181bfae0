// The ZeRO paper's section 10 (throughput) from the step-time model
// (zero/perf/) on cluster profiles (zero/perf/profiles/): nobody here has 400
// V100s, so each point is a prediction, with the paper's methodology:
// GPT-2-like models (its Tables 4-10: layers, width, heads), sequence length
// 1024, fp16, activation checkpointing of every block, and at each point the
// largest micro-batch per GPU that the memory predictor fits on the device
// (less the trainer's margin of 1 GiB + 2%). ZeRO is Pos+g (stage 2) with
// ZeRO-R's partitioned checkpoints, tensor parallelism inside a node; the
// baseline is tensor parallelism alone (stage 0, whole checkpoints, as
// Megatron-LM in 2019) on the fewest power-of-two GPUs that hold the model.
// Throughput per GPU counts the matmuls' and attention's FLOPs, recomputation
// included. Nothing is fitted to the paper's numbers; they are printed beside.
//   paper_fig2/3/4/6/7/8.csv/png (V100 cluster), h100_fig2/3/4 (H100 cluster),
//   one_gpu.csv/png (one H100, with and without offload)
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/run/predict_report.h"
#include "zero/reproduce/report.h"

struct ClusterRun {
    int L = 0, H = 0, NH = 0;  // the model
    int gpus = 1, tp = 1, stage = 2;
    bool pa = true, pa_cpu = false;  // ZeRO-R's partitioned checkpoints, on the host
    bool offload = false;            // optimizer offload, and at stage 3 parameter offload (one-GPU study)
    int batch = 0;                   // 0: the largest that fits
    int recompute = 2;               // every block's input checkpointed (the paper's setting)
    int micro_steps = 1;             // gradient accumulation (offload: added up on the device)
};

struct ClusterPoint {
    double params = 0, device_gib = 0, tflops = 0, tokens_per_s = 0;
    int batch = 0;  // 0: does not fit
    StepPrediction pred;
};

// The trainer's flags for a point (`train_gpt2_zero ... --predict PROFILE`
// would print the same): the paper's GPT-2-like shape, T 1024, fp16.
inline std::string cluster_flags(const ClusterRun& r, int batch) {
    const long tokens = (long)batch * 1024 * (r.gpus / r.tp) * r.micro_steps;
    std::string f = fmt("-e L=%.0f,", r.L) + fmt("H=%.0f,", r.NH) + fmt("C=%.0f,V=50257,T=1024", r.H) +
                    fmt(" -t 1024 -p fp16 -b %.0f", batch) + fmt(" -z %.0f", r.stage) + fmt(" -r %.0f", r.recompute) +
                    fmt(" --tp %.0f", r.tp) + fmt(" --ranks %.0f", r.gpus);
    if (r.micro_steps > 1) f += fmt(" -d %.0f", (double)tokens);
    if (!r.pa) f += " --partition_activations 0";
    if (r.pa_cpu) f += " --offload_activations 1";
    if (r.offload) f += std::string(" --offload_optimizer cpu") + (r.stage == 3 ? " --offload_param cpu" : "") +
                        (r.micro_steps > 1 ? " --offload_grad_accum device" : "");
    return f;
}

// Those flags as the trainer takes them.
inline TrainOptions cluster_options(const ClusterRun& r, int batch) {
    std::vector<std::string> words = {"train_gpt2_zero"};
    std::istringstream in(cluster_flags(r, batch));
    for (std::string w; in >> w;) words.push_back(w);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(&w[0]);
    TrainOptions o;
    parse_flags((int)argv.size(), argv.data(), o);
    resolve_batch(o);
    return o;
}
inline MemoryQuery cluster_query(const ClusterRun& r, int batch) {
    TrainOptions o = cluster_options(r, batch);
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
    c.device_gib = device_bytes(q) / 1073741824.0;
    if (c.batch == 0 || (r.batch > 0 && !fits_device(q, p))) {
        c.batch = 0;
        return c;
    }
    TrainOptions o = cluster_options(r, c.batch);
    c.pred = predict_run(o, make_run_setup(o), p);  // from the trainer's own dry run
    c.tflops = c.pred.tflops_per_device, c.tokens_per_s = c.pred.tokens_per_s;
    return c;
}

// The fewest power-of-two GPUs of tensor parallelism that hold the model at B 1 (the baseline's MP).
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
};

inline void write_study(const std::string& dir, const std::string& name, const std::string& title,
                        const std::string& xlabel, const std::string& ylabel, const std::vector<StudySeries>& series,
                        bool xlog = false) {
    CsvWriter csv(dir + "/" + name + ".csv", {"series", "x", "y", "note"});
    Chart c;
    c.title = title, c.x.label = xlabel, c.y.label = ylabel, c.x.log = xlog;
    c.width = 1000, c.legend_outside = true;
    for (size_t i = 0; i < series.size(); i++) {
        const StudySeries& s = series[i];
        bool paper = s.label.rfind("paper", 0) == 0;
        LineSeries l{s.label, s.x, s.y, plot_color((int)i), paper, true, true, paper ? 3 : 5};
        c.lines.push_back(l);
        for (size_t k = 0; k < s.x.size(); k++)
            csv.row({csv_field(s.label), csv_num(s.x[k], "%.6g"), csv_num(s.y[k], "%.6g"),
                     csv_field(k < s.notes.size() ? s.notes[k] : "")});
    }
    csv.save();
    write_png(dir + "/" + name + ".png", render_chart(c));
}

// Figure 2: throughput per GPU vs model size on 400 GPUs, ZeRO against the baseline (the paper's Table 5 shapes).
struct PaperModel {
    int L, H, NH, zero_mp, baseline_heads;  // the paper's Table 5
    double paper_zero, paper_baseline;      // read from its Figure 2 (TFLOP/s per GPU, approx.)
};
inline std::vector<PaperModel> figure2_models() {
    return {{48, 1600, 16, 1, 16, 30.3, 26.4},    {72, 3072, 24, 4, 24, 36.9, 23.2},
            {88, 6144, 32, 4, 64, 35.9, 5.0},     {132, 6144, 32, 16, 64, 36.5, 6.4},
            {100, 8192, 64, 16, 128, 37.5, 5.2},  {125, 8192, 64, 16, 128, 38.6, 3.8},
            {150, 8192, 64, 16, 128, 28.1, 3.8},  {175, 8192, 64, 16, 128, 26.9, 3.9},
            {212, 8192, 64, 16, 256, 20.9, 2.2}};
}

inline std::vector<StudySeries> figure2(const Profile& p, int gpus, bool with_paper, std::vector<std::string>& rows) {
    StudySeries zero{"ZeRO (Pos+g, Pa, MP in the node)"}, base{"baseline (MP alone)"}, pz{"paper: ZeRO"},
        pb{"paper: baseline"};
    int G = p.devices_per_node;
    for (const PaperModel& m : figure2_models()) {
        ClusterRun z;
        z.L = m.L, z.H = m.H, z.NH = m.NH, z.stage = 2, z.tp = std::min(m.zero_mp, G), z.gpus = gpus / z.tp * z.tp;
        ClusterPoint zp = cluster_point(p, z);
        ClusterRun b = z;
        b.stage = 0, b.pa = false;
        b.NH = m.baseline_heads;  // its MP reaches 256: more heads, as the paper's Table 5 gives them
        b.tp = fewest_tp(p, b, 256);
        b.gpus = b.tp ? gpus / b.tp * b.tp : 0;
        ClusterPoint bp = b.tp ? cluster_point(p, b) : ClusterPoint{};
        double x = zp.params / 1e9;
        if (zp.batch) zero.x.push_back(x), zero.y.push_back(zp.tflops),
            zero.notes.push_back(fmt("MP %.0f, ", z.tp) + fmt("B %.0f", zp.batch));
        if (bp.batch) base.x.push_back(x), base.y.push_back(bp.tflops),
            base.notes.push_back(fmt("MP %.0f, ", b.tp) + fmt("B %.0f", bp.batch));
        pz.x.push_back(x), pz.y.push_back(m.paper_zero), pb.x.push_back(x), pb.y.push_back(m.paper_baseline);
        rows.push_back(fmt("%.3g B", x) + "|" + (zp.batch ? fmt("%.1f", zp.tflops) + fmt(" (MP %.0f", z.tp) +
                                                                 fmt(", B %.0f)", zp.batch)
                                                           : std::string("does not fit")) +
                       "|" + (with_paper ? fmt("%.1f", m.paper_zero) : std::string("")) + "|" +
                       (bp.batch ? fmt("%.1f", bp.tflops) + fmt(" (MP %.0f", b.tp) + fmt(", B %.0f)", bp.batch)
                                 : std::string("does not fit")) +
                       "|" + (with_paper ? fmt("%.1f", m.paper_baseline) : std::string("")));
    }
    std::vector<StudySeries> out = {zero, base};
    if (with_paper) out.push_back(pz), out.push_back(pb);
    return out;
}

// Figure 3: a 60B model (75 x 8192, MP 16) from 64 to 400 GPUs: per GPU and in all, against linear scaling from 64.
inline std::vector<StudySeries> figure3(const Profile& p, bool with_paper, std::vector<std::string>& rows) {
    StudySeries total{"ZeRO: all GPUs (TFLOP/s / 10)"}, per{"ZeRO: per GPU"}, linear{"linear from 64 GPUs (/ 10)"},
        paper{"paper: per GPU"}, at_paper{"ZeRO per GPU at the paper's batches"};
    const int gpus[4] = {64, 128, 256, 400}, paper_batch[4] = {16, 48, 48, 64};  // its Table 6
    const double paper_per[4] = {25.6, 37.5, 39.0, 36.6};
    double first = 0;
    for (int i = 0; i < 4; i++) {
        ClusterRun r;
        r.L = 75, r.H = 8192, r.NH = 32, r.tp = std::min(16, p.devices_per_node), r.gpus = gpus[i];
        ClusterPoint c = cluster_point(p, r);
        if (!c.batch) continue;
        if (first == 0) first = c.tflops;
        per.x.push_back(gpus[i]), per.y.push_back(c.tflops), per.notes.push_back(fmt("B %.0f", c.batch));
        total.x.push_back(gpus[i]), total.y.push_back(c.tflops * gpus[i] / 10);
        linear.x.push_back(gpus[i]), linear.y.push_back(first * gpus[i] / 10);
        paper.x.push_back(gpus[i]), paper.y.push_back(paper_per[i]);
        r.batch = paper_batch[i];
        ClusterPoint pb = cluster_point(p, r);
        if (pb.batch) at_paper.x.push_back(gpus[i]), at_paper.y.push_back(pb.tflops);
        rows.push_back(fmt("%.0f", gpus[i]) + "|" + fmt("%.0f", c.batch) + "|" + fmt("%.1f", c.tflops) + "|" +
                       fmt("%.0f", c.tflops * gpus[i]) + "|" + fmt("%.2f", c.tflops / first) + "|" +
                       (pb.batch ? fmt("%.1f", pb.tflops) + fmt(" (B %.0f)", pb.batch) : std::string("does not fit")) +
                       "|" + (with_paper ? fmt("%.1f", paper_per[i]) : std::string("")));
    }
    std::vector<StudySeries> out = {per, total, linear, at_paper};
    if (with_paper) out.push_back(paper);
    return out;
}

// Figure 4: no model parallelism on 128 GPUs: ZeRO (Pos+g) against plain data parallelism (the paper's Table 10).
inline std::vector<StudySeries> figure4(const Profile& p, bool with_paper, std::vector<std::string>& rows) {
    struct M { int L, H, NH; double paper_zero, paper_dp; };
    const M models[] = {{24, 1920, 16, -1, 39.3}, {40, 1536, 16, -1, 18.1}, {34, 1920, 16, 40.3, -1},
                        {54, 1920, 16, 41.9, -1}, {64, 2304, 24, 43.5, -1}, {52, 3072, 24, 47.0, -1},
                        {72, 3072, 24, 47.0, -1}, {50, 4096, 32, 41.1, -1}, {54, 4096, 32, 35.7, -1},
                        {58, 4096, 32, 32.9, -1}, {62, 4096, 32, 21.2, -1}};
    StudySeries zero{"ZeRO (Pos+g)"}, dp{"data parallelism alone"}, pz{"paper: ZeRO"}, pd{"paper: data parallelism"};
    for (const M& m : models) {
        ClusterRun r;
        r.L = m.L, r.H = m.H, r.NH = m.NH, r.tp = 1, r.gpus = 128;
        ClusterPoint z = cluster_point(p, r);
        r.stage = 0;
        ClusterPoint d = cluster_point(p, r);
        double x = (z.params ? z.params : d.params) / 1e9;
        if (z.batch) zero.x.push_back(x), zero.y.push_back(z.tflops), zero.notes.push_back(fmt("B %.0f", z.batch));
        if (d.batch) dp.x.push_back(x), dp.y.push_back(d.tflops), dp.notes.push_back(fmt("B %.0f", d.batch));
        if (m.paper_zero > 0) pz.x.push_back(x), pz.y.push_back(m.paper_zero);
        if (m.paper_dp > 0) pd.x.push_back(x), pd.y.push_back(m.paper_dp);
        auto cell = [](const ClusterPoint& c) {
            return c.batch ? fmt("%.1f", c.tflops) + fmt(" (B %.0f)", c.batch) : std::string("does not fit");
        };
        rows.push_back(fmt("%.3g B", x) + "|" + cell(z) + "|" + (with_paper && m.paper_zero > 0 ? fmt("%.1f", m.paper_zero) : "") +
                       "|" + cell(d) + "|" + (with_paper && m.paper_dp > 0 ? fmt("%.1f", m.paper_dp) : ""));
    }
    std::vector<StudySeries> out = {zero, dp};
    if (with_paper) out.push_back(pz), out.push_back(pd);
    return out;
}

// Table 3's configurations at MP 16: C1 Pos, C2 Pos+Pa, C3 Pos+g, C4 Pos+g+Pa, C5 Pos+g+Pa+cpu. (CB and MD,
// constant buffers and defragmentation, are what this trainer always does: everything allocated once.)
inline ClusterRun config_run(int c, int L, int NH, int gpus, int batch) {
    ClusterRun r;
    r.L = L, r.H = 8192, r.NH = NH, r.tp = 16, r.gpus = gpus, r.batch = batch;
    r.stage = c <= 2 ? 1 : 2, r.pa = c == 2 || c >= 4, r.pa_cpu = c == 5;
    return r;
}

// Figures 6-8: the largest model at batch 16, the memory of 40B and 100B, the throughput of 60B and 170B.
inline void figures678(const Profile& p, std::vector<StudySeries>& f6, std::vector<StudySeries>& f7,
                       std::vector<StudySeries>& f8, std::vector<std::string>& rows) {
    StudySeries size{"largest model (B), batch 16"}, psize{"paper: largest model"}, m40{"40B, batch 16: device GiB"},
        m100{"100B, batch 32: device GiB"}, p40{"paper: 40B"}, p100{"paper: 100B"}, t60{"60B on 128 GPUs"},
        t170{"170B on 400 GPUs"}, pt60{"paper: 60B"}, pt170{"paper: 170B"};
    const double paper_size[5] = {40, 60, 50, 140, 150}, paper40[5] = {29.7, 24.1, 25.5, 19.8, 19.8},
                 paper100[5] = {-1, -1, -1, 29.6, 26.6}, paper60[5] = {11.7, 12.1, 16.8, 35.0, 31.8},
                 paper170[5] = {-1, -1, -1, -1, 20.8};
    for (int c = 1; c <= 5; c++) {
        int L = 1;
        while (L < 1024 && fits_device(cluster_query(config_run(c, L + 1, 64, 400, 16), 16), p)) L++;
        double biggest = (double)ParamLayout(cluster_query(config_run(c, L, 64, 400, 16), 16).cfg, 1).num_parameters() / 1e9;
        double g40 = device_bytes(cluster_query(config_run(c, 50, 32, 400, 16), 16)) / 1073741824.0;
        double g100 = device_bytes(cluster_query(config_run(c, 125, 64, 400, 32), 32)) / 1073741824.0;
        ClusterPoint a = cluster_point(p, config_run(c, 75, 64, 128, 0)), b = cluster_point(p, config_run(c, 212, 64, 400, 0));
        size.x.push_back(c), size.y.push_back(biggest), psize.x.push_back(c), psize.y.push_back(paper_size[c - 1]);
        m40.x.push_back(c), m40.y.push_back(g40), m100.x.push_back(c), m100.y.push_back(g100);
        p40.x.push_back(c), p40.y.push_back(paper40[c - 1]);
        if (paper100[c - 1] > 0) p100.x.push_back(c), p100.y.push_back(paper100[c - 1]);
        if (a.batch) t60.x.push_back(c), t60.y.push_back(a.tflops), t60.notes.push_back(fmt("B %.0f", a.batch));
        if (b.batch) t170.x.push_back(c), t170.y.push_back(b.tflops), t170.notes.push_back(fmt("B %.0f", b.batch));
        pt60.x.push_back(c), pt60.y.push_back(paper60[c - 1]);
        if (paper170[c - 1] > 0) pt170.x.push_back(c), pt170.y.push_back(paper170[c - 1]);
        auto tf = [](const ClusterPoint& q) {
            return q.batch ? fmt("%.1f", q.tflops) + fmt(" (B %.0f)", q.batch) : std::string("does not fit");
        };
        rows.push_back(fmt("C%.0f", c) + "|" + fmt("%.0f", biggest) + " (" + fmt("%.0f", paper_size[c - 1]) + ")|" +
                       fmt("%.1f", g40) + " (" + fmt("%.1f", paper40[c - 1]) + ")|" + fmt("%.1f", g100) +
                       (paper100[c - 1] > 0 ? " (" + fmt("%.1f", paper100[c - 1]) + ")" : std::string(" (-)")) + "|" +
                       tf(a) + " (" + fmt("%.1f", paper60[c - 1]) + ")|" + tf(b) +
                       (paper170[c - 1] > 0 ? " (" + fmt("%.1f", paper170[c - 1]) + ")" : std::string(" (-)")));
    }
    f6 = {size, psize};
    f7 = {m40, m100, p40, p100};
    f8 = {t60, t170, pt60, pt170};
}

// One GPU: throughput against model size, with and without optimizer offload (and, past what
// that holds, parameter offload at stage 3), at the largest micro-batch that fits.
inline std::vector<StudySeries> one_gpu(const Profile& p, const std::string& runs_csv, std::vector<std::string>& rows) {
    StudySeries plain{"no offload"}, off{"optimizer offload (stage 2)"}, off3{"optimizer + parameter offload (stage 3)"};
    struct M { int L, H, NH; };
    const M models[] = {{12, 768, 12}, {24, 1024, 16}, {36, 1280, 20}, {48, 1600, 25}, {64, 2048, 16},
                        {24, 4096, 32}, {32, 4096, 32}, {40, 4096, 32}, {48, 4096, 32}, {64, 4096, 32}};
    for (const M& m : models) {
        ClusterRun r;
        r.L = m.L, r.H = m.H, r.NH = m.NH, r.tp = 1, r.gpus = 1, r.stage = 2;
        ClusterPoint a = cluster_point(p, r);
        r.offload = true;
        ClusterPoint b = cluster_point(p, r);
        r.stage = 3;
        ClusterPoint c = cluster_point(p, r);
        double x = (a.params ? a.params : b.params ? b.params : c.params) / 1e9;
        if (a.batch) plain.x.push_back(x), plain.y.push_back(a.tokens_per_s), plain.notes.push_back(fmt("B %.0f", a.batch));
        if (b.batch) off.x.push_back(x), off.y.push_back(b.tokens_per_s), off.notes.push_back(fmt("B %.0f", b.batch));
        if (c.batch) off3.x.push_back(x), off3.y.push_back(c.tokens_per_s), off3.notes.push_back(fmt("B %.0f", c.batch));
        auto cell = [](const ClusterPoint& q) {
            return q.batch ? fmt("%.0f", q.tokens_per_s) + fmt(" (B %.0f, ", q.batch) + fmt("%.0f TFLOP/s)", q.tflops)
                           : std::string("does not fit");
        };
        rows.push_back(fmt("%.3g B", x) + "|" + cell(a) + "|" + cell(b) + "|" + cell(c));
    }
    // runs measured on an H100 (profiles/h100_runs.csv: date, GPU, command), and the model at the same settings
    CsvTable h100_runs = read_csv_table(runs_csv);
    StudySeries measured{"measured on an H100 (" + h100_runs.text(0, "date") + ")"}, same{"predicted at those settings"};
    struct Run { int L, H, NH, stage, batch, micro_steps; bool offload; double tokens_per_s; };
    std::vector<Run> runs;
    for (size_t i = 0; i < h100_runs.rows.size(); i++) {
        auto n = [&](const char* c) { return h100_runs.num(i, c); };
        runs.push_back({(int)n("layers"), (int)n("channels"), (int)n("heads"), (int)n("stage"), (int)n("micro_batch"),
                        (int)n("micro_steps"), n("offload") != 0, n("tokens_per_s")});
    }
    for (const Run& m : runs) {
        ClusterRun r;
        r.L = m.L, r.H = m.H, r.NH = m.NH, r.stage = m.stage, r.batch = m.batch, r.offload = m.offload;
        r.micro_steps = m.micro_steps;
        r.recompute = 0;  // as those runs were
        ClusterPoint c = cluster_point(p, r);
        std::string what = fmt("B %.0f", m.batch) + (m.micro_steps > 1 ? fmt(" x %.0f micro-steps", (double)m.micro_steps) : "") +
                           (m.offload ? ", offload" : "");
        measured.x.push_back(c.params / 1e9), measured.y.push_back(m.tokens_per_s);
        measured.notes.push_back(what);
        same.x.push_back(c.params / 1e9), same.y.push_back(c.tokens_per_s), same.notes.push_back(measured.notes.back());
        rows.push_back(fmt("%.3g B", c.params / 1e9) + " at " + what +
                       "|measured " + fmt("%.0f", m.tokens_per_s) + "|predicted " + fmt("%.0f", c.tokens_per_s) + "|" +
                       fmt("%+.0f%%", 100 * (c.tokens_per_s / m.tokens_per_s - 1)));
    }
    return {plain, off, off3, measured, same};
}

inline void study_table(Report& rep, const std::vector<std::string>& header, const std::vector<std::string>& rows) {
    std::vector<std::vector<std::string>> cells;
    for (const std::string& r : rows) {
        std::vector<std::string> c;
        size_t start = 0, bar;
        while ((bar = r.find('|', start)) != std::string::npos) c.push_back(r.substr(start, bar - start)), start = bar + 1;
        c.push_back(r.substr(start));
        cells.push_back(c);
    }
    rep.table(header, cells);
}

// The section of report.md, and every figure's PNG and CSV.
inline void write_paper_throughput(const std::string& dir, const std::string& profiles, Report& rep) {
    Profile v100 = load_profile(profiles + "/v100_dgx2.json"), h100s = load_profile(profiles + "/h100_dgx.json"),
            h100 = load_profile(profiles + "/h100.json");
    OpTimer probe(v100, MemoryQuery{}, Placement{});
    std::string chain;
    for (const auto& r : probe.refs) chain += (chain.empty() ? "" : " -> ") + r->path + (r->measured ? " (measured)" : "");
    rep.heading("Throughput: the paper's section 10, from the step-time model");
    rep.para("Nobody here has 400 V100s, so every point below is a prediction of `zero/perf/` on a cluster profile "
             "(`" + profiles + "/`): the V100 DGX-2 cluster of the paper (16 V100 32GB per node on NVSwitch, 800 "
             "Gbps per node) and a current one (8 H100 per node on NVLink 4, 8 x 400 Gb/s), with the paper's "
             "methodology: its GPT-2-like shapes (Tables 4-10), sequence length 1024, fp16, every block's input "
             "checkpointed, and at each point the largest micro-batch the memory predictor fits in the device "
             "(less 1 GiB + 2%). ZeRO is Pos+g with ZeRO-R's partitioned checkpoints and tensor parallelism inside "
             "a node; the baseline is tensor parallelism alone (Megatron-LM as in 2019: stage 0, whole "
             "checkpoints) on the fewest power-of-two GPUs that hold the model. Throughput per GPU counts the "
             "matmuls' and attention's FLOPs with the recomputation (the paper does not say how it counts). "
             "The paper's numbers, read from its figures, are drawn dashed beside; nothing is fitted to them.");
    rep.para("**How far to trust them.** Collectives follow the alpha-beta model of `zero/perf/collectives.h` on "
             "the specifications' bandwidths and NCCL's per-step latencies; kernels run at the efficiency (rate "
             "over peak) their kind reached in a measured profile, applied to the device's peak and memory "
             "bandwidth. The chain of profiles the efficiencies come from: `" + chain + "`: every kernel of this "
             "trainer timed on an H100 in its own shapes, as a fraction of that H100's best bf16 matmul and device "
             "copy, which are also the H100 profiles' ceilings. The V100's ceilings are its datasheet's: that its "
             "kernels reach the same fractions of them is **an assumption, and the largest one** (a V100's best "
             "matmul falls short of its datasheet as the H100's does, so the V100 points are on the fast side).");
    std::vector<std::string> rows;
    std::vector<StudySeries> f2 = figure2(v100, 400, true, rows);
    write_study(dir, "paper_fig2", "Figure 2: throughput per GPU vs model size, 400 V100 (predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", f2);
    // predicted over the paper's (or measured), averaged where both have the point
    auto ratio = [&](const StudySeries& a, const StudySeries& b) {
        double sum = 0;
        int n = 0;
        for (size_t i = 0; i < a.x.size(); i++)
            for (size_t k = 0; k < b.x.size(); k++)
                if (a.x[i] == b.x[k]) sum += a.y[i] / b.y[k], n++;
        return n ? sum / n : NAN;
    };
    std::vector<std::string> one_rows;
    std::vector<StudySeries> one = one_gpu(h100, profiles + "/h100_runs.csv", one_rows);  // its last series: measured H100 runs, the model beside
    double h100_ratio = 0;  // the runs without offload, point by point
    for (int i = 0; i < 3; i++) h100_ratio += one[4].y[i] / one[3].y[i] / 3;
    rep.heading("Figure 2: ZeRO against tensor parallelism alone, 400 V100", 3);
    rep.image("paper_fig2.png", "Figure 2");
    rep.para("The paper: \"ZeRO runs 100B parameter models on a 400 Nvidia V100 GPU cluster with over 38 TFlops per "
             "GPU\"; the baseline \"cannot scale efficiently beyond 40B parameters\" (about 5 TFLOP/s per GPU with "
             "tensor parallelism across two nodes), \"up to 10x\" slower. Predicted here (MP, micro-batch):");
    study_table(rep, {"model", "ZeRO predicted", "paper", "baseline predicted", "paper"}, rows);
    rep.para("Where the model and the paper part: the predicted ZeRO runs at " + fmt("%.2f", ratio(f2[0], f2[2])) +
             " times the paper's throughput on average, the baseline at " + fmt("%.2f", ratio(f2[1], f2[3])) +
             " times. Not the kernel efficiencies on the device they were measured on: on that H100 the same model "
             "predicts " + fmt("%.2f", h100_ratio) + " times what this trainer's own GPT-2 runs without offload did "
             "(the one-GPU rows below). Part of it is the V100's ceiling: the model takes its datasheet's 125 "
             "TFLOP/s as its best matmul, where the H100's best reached 78% of its datasheet's. The rest is the "
             "paper's software of 2019 (Megatron-LM's separate softmax, bias, GELU and dropout kernels, which this "
             "trainer fuses or has not), and for the baseline, whose step beyond a node is mostly tensor-parallel "
             "all-reduces over the network, the collectives: the model moves them at the specifications' "
             "bandwidths, and NCCL across nodes in 2019 reached some fraction of those (a guess this model cannot "
             "check without a measured cluster). What the model does reproduce is the shape: ZeRO's throughput holds as the "
             "model grows while the baseline's falls by an order of magnitude once its tensor parallelism leaves "
             "the node (the network's 6.25 GB/s per GPU against NVSwitch's 150), and inside a node the baseline "
             "stays near ZeRO.");
    rows.clear();
    write_study(dir, "paper_fig3", "Figure 3: 60B (75 x 8192, MP 16) from 64 to 400 V100 (predicted)", "GPUs",
                "TFLOP/s", figure3(v100, true, rows));
    rep.heading("Figure 3: super-linear scaling of a 60B model", 3);
    rep.image("paper_fig3.png", "Figure 3");
    rep.para("The paper: \"super linear speedup in the regime of 64-400 GPUs\": Pos+g's per-GPU memory falls with "
             "the data-parallel degree, so a larger micro-batch fits and each GPU computes more per byte it "
             "communicates. The predictor fits a larger micro-batch than the paper ran already at 64 GPUs, where "
             "the model's throughput has nearly saturated, so the largest-batch line is almost linear; at the "
             "paper's own batches (its Table 6) the model shows the super-linear step from 64 to 128 GPUs, "
             "smaller than the paper's. (The all-GPU line and the linear line are divided by 10 to share the "
             "axis.)");
    study_table(rep, {"GPUs", "micro-batch", "TFLOP/s per GPU", "all GPUs", "per GPU / at 64", "at the paper's batch",
                      "paper per GPU"}, rows);
    rows.clear();
    write_study(dir, "paper_fig4", "Figure 4: no model parallelism, 128 V100 (predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", figure4(v100, true, rows));
    rep.heading("Figure 4: the largest model without model parallelism", 3);
    rep.image("paper_fig4.png", "Figure 4");
    rep.para("The paper: ZeRO \"can train models with up to 13B parameters without MP on 128 GPUs, achieving "
             "throughput over 40 TFlops per GPU on average\"; data parallelism alone stops at 1.4B, under 20.");
    study_table(rep, {"model", "ZeRO predicted", "paper", "data parallel predicted", "paper"}, rows);
    rows.clear();
    std::vector<StudySeries> f6, f7, f8;
    figures678(v100, f6, f7, f8, rows);
    write_study(dir, "paper_fig6", "Figure 6: the largest model per configuration, MP 16, batch 16 (predicted)",
                "configuration C1..C5", "billions of parameters", f6);
    write_study(dir, "paper_fig7", "Figure 7: device memory of 40B and 100B per configuration (predicted)",
                "configuration C1..C5", "GiB per GPU (predictor's reserved bytes)", f7);
    write_study(dir, "paper_fig8", "Figure 8: throughput per configuration (predicted)", "configuration C1..C5",
                "TFLOP/s per GPU", f8);
    rep.heading("Figures 6-8: configurations C1-C5 (Table 3)", 3);
    rep.image("paper_fig6.png", "Figure 6");
    rep.image("paper_fig7.png", "Figure 7");
    rep.image("paper_fig8.png", "Figure 8");
    rep.para("C1 Pos, C2 Pos + Pa, C3 Pos+g, C4 Pos+g + Pa, C5 Pos+g + Pa+cpu, all at MP 16 (CB and MD, constant "
             "buffers and defragmentation, are what this trainer does anyway: everything is allocated once). "
             "Predicted, the paper's in brackets (its 60B runs are on 128 GPUs, its 170B on 400):");
    study_table(rep, {"config", "largest model B", "40B GiB", "100B GiB", "60B TFLOP/s", "170B TFLOP/s"}, rows);
    rows.clear();
    write_study(dir, "h100_fig2", "Figure 2 on 400 H100 (50 DGX H100 nodes, predicted)",
                "model size (billions of parameters)", "TFLOP/s per GPU", figure2(h100s, 400, false, rows));
    rep.heading("The same studies on an H100 cluster", 3);
    rep.image("h100_fig2.png", "Figure 2 on H100");
    study_table(rep, {"model", "ZeRO predicted", "", "baseline predicted", ""}, rows);
    rows.clear();
    write_study(dir, "h100_fig3", "Figure 3 on H100: 60B, MP 8 (predicted)", "GPUs", "TFLOP/s", figure3(h100s, false, rows));
    rep.image("h100_fig3.png", "Figure 3 on H100");
    study_table(rep, {"GPUs", "micro-batch", "TFLOP/s per GPU", "all GPUs", "per GPU / at 64", "at the paper's batch",
                      ""}, rows);
    rows.clear();
    write_study(dir, "h100_fig4", "Figure 4 on 128 H100 (predicted)", "model size (billions of parameters)",
                "TFLOP/s per GPU", figure4(h100s, false, rows));
    rep.image("h100_fig4.png", "Figure 4 on H100");
    study_table(rep, {"model", "ZeRO predicted", "", "data parallel predicted", ""}, rows);
    write_study(dir, "one_gpu", "One H100: tokens/s vs model size, with and without offload (predicted)",
                "model size (billions of parameters)", "tokens/s", one, true);
    rep.heading("One GPU, with and without offload", 3);
    rep.image("one_gpu.png", "one GPU");
    rep.para("One H100 (`h100.json`), T 1024, bf16, the largest micro-batch that fits 80 GB; the last rows set "
             "runs measured on an H100 (`h100_runs.csv`) beside the model at the same settings.");
    study_table(rep, {"model", "no offload", "optimizer offload", "optimizer + parameter offload (stage 3)"}, one_rows);
}

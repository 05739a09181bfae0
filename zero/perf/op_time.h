// How long one operation of the step takes (a dry run's, zero/base/ops.h), on
// a profile (zero/perf/profile.h) and a placement of the ranks.
//
// Emulated ranks on a measured profile (the way `--ranks N` runs): a kernel,
// transfer or host operation takes what the calibration measured for it while
// min(N, R) ranks ran it at once, R being the most the calibration ran (the
// CPU's cores: beyond them the N ranks' threads share the cores, N / R times
// as long; the CPU build's layout, zero/perf/simulate.h, shares them by the
// ranks actually busy instead); a collective what it measured in a world of N
// ranks in groups of the same size. A shape the calibration did not time is interpolated from
// those of the same kind it did: the rate (work per second) between the two
// measured shapes whose work brackets it, linearly in log(work), and held at
// the ends. Work is FLOPs for the matmuls and attention, bytes for the rest.
//
// One rank per device of a cluster (a spec profile): a kernel runs at the
// efficiency (rate / peak) its kind reached elsewhere — the profile's own
// `efficiency` table, else along `efficiency_from` to a measured profile (a
// fused GELU at the plain matmul's) — applied to this device's peak FLOP/s or
// memory bandwidth (a kind the measured profile never timed, such as the GELU
// -r 1 recomputes where its runs fused GELU into the matmul: its bytes at the
// rate of that profile's device copies); a pipeline's receive crosses the link or the network;
// collectives follow zero/perf/collectives.h over the node's link and the
// network; transfers cross PCIe; the CPU AdamW and the host adds run at the
// host's rates.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "zero/perf/collectives.h"
#include "zero/perf/profile.h"
#include "zero/base/ops.h"
#include "zero/engine/memory_predictor.h"

// The kind without its dtype suffix: matmul_fwd_f32 -> matmul_fwd.
inline std::string base_kind(const std::string& kind) {
    for (const char* sfx : {"_f32", "_16"})
        if (kind.size() > 4 && kind.compare(kind.size() - strlen(sfx), strlen(sfx), sfx) == 0)
            return kind.substr(0, kind.size() - strlen(sfx));
    return kind;
}

// FLOPs of a matmul or attention kernel (0 for the others): the model's FLOPs,
// causal attention counted as the trainer's 6 L C T per token does.
inline double op_flops(const std::string& kind, const std::vector<long>& d) {
    std::string b = base_kind(kind);
    if (b.rfind("matmul_fwd", 0) == 0) return 2.0 * d[0] * d[1] * d[2];
    if (b.rfind("matmul_bwd", 0) == 0) return 4.0 * d[0] * d[1] * d[2];
    if (b == "attention_fwd") return 2.0 * d[0] * (double)d[1] * d[1] * d[2];
    if (b == "attention_bwd") return 4.0 * d[0] * (double)d[1] * d[1] * d[2];
    return 0;
}

// A step's FLOPs as NVIDIA's Megatron-LM reports count them (Narayanan et al.,
// arXiv 2104.04473, section 5.1): per layer and forward pass 24 B T C^2 for
// the matmuls and 4 B T^2 C for the whole T x T attention, three passes (four
// with every layer recomputed), and the logits' matmul 6 B T C V. The papers
// the cluster profiles are anchored to and compared with publish rates in
// this count (this trainer's own, op_flops, halves the causal attention).
inline double megatron_flops(const GPT2Config& c, double B, double T, bool recomputed) {
    const double L = c.num_layers, C = c.channels, V = c.padded_vocab_size;
    return 24.0 * (recomputed ? 4 : 3) * B * T * L * C * C * (1 + T / (6 * C)) + 6.0 * B * T * C * V;
}

// Bytes an elementwise kernel, copy or host operation reads and writes, s per element.
inline double op_bytes(const std::string& kind, const std::vector<long>& d, double s) {
    std::string b = base_kind(kind);
    double n = d.empty() ? 0 : (double)d[0];
    if (b == "layernorm_fwd") return 2.0 * d[0] * d[1] * s;
    if (b == "residual_layernorm_fwd") return 4.0 * d[0] * d[1] * s;
    if (b == "layernorm_bwd") return 3.0 * d[0] * d[1] * s;
    if (b == "residual_fwd" || b == "accumulate" || b == "host_add") return 3.0 * n * s;
    if (b == "gelu_fwd") return 2.0 * n * s;
    if (b == "encoder_fwd" || b == "encoder_bwd" || b == "encoder_fwd_vocab" || b == "encoder_bwd_vocab")
        return 3.0 * d[0] * d[1] * d[2] * s;
    if (b == "classifier") return 2.0 * d[0] * d[1] * s;
    if (b == "vocab_local_stats" || b == "vocab_sum_exp") return (double)d[0] * d[1] * s;
    if (b == "vocab_finish") return 2.0 * d[0] * d[1] * s;
    if (b == "loss_sum") return 12.0 * n;
    if (b == "sumsq" || b == "host_sumsq") return n * s;
    if (b == "adamw" || b == "cpu_adamw") return n * (24.0 + 2 * s);
    if (b == "copy") return 2.0 * n;
    if (b == "upload_tokens") return 4.0 * n;
    if (b == "recv") return 2.0 * n;  // a copy from the sender's buffer
    return n;  // zero, to_host, to_device: bytes
}

// The one-launch kernels of the prepared variants (zero/base/variants.h) stand
// in for kernels every profile has timed, over the same bytes: AdamW and the
// sums of squares over a table of pieces (dims: elements, pieces) as one
// adamw or sumsq over all their elements, the loss summed on the device (n
// floats read) as loss_sum's 12 bytes an element over n / 3. A profile that
// did not time them itself (calibrated without the variant) times them so: at
// the rate of one launch over the whole, without the per-piece launches.
inline bool variant_stand_in(const StepOp& op, StepOp& as) {
    const std::string b = base_kind(op.name), sfx = op.name.substr(b.size());
    if (b == "adamw_fused" || b == "sumsq_fused") as.name = b.substr(0, b.size() - 6) + sfx, as.dims = {op.dims[0]};
    else if (b == "loss_total") as.name = "loss_sum", as.dims = {(op.dims[0] + 2) / 3};
    else return false;
    as.kind = OpKind::Kernel, as.lane = op.lane;
    return true;
}

inline double op_work(const std::string& kind, const std::vector<long>& d, double s) {
    double f = op_flops(kind, d);
    return f > 0 ? f : op_bytes(kind, d, s);
}

inline std::vector<long> parse_dims(const std::string& key, std::string& kind) {
    size_t sp = key.find(' ');
    kind = key.substr(0, sp);
    std::vector<long> d;
    if (sp == std::string::npos) return d;
    const char* c = key.c_str() + sp + 1;
    while (*c) {
        d.push_back(strtol(c, (char**)&c, 10));
        if (*c == 'x') c++;
    }
    return d;
}

// The ranks of a collective's group: data (ZeRO's), tensor, pipe (one rank per stage), tied (first and last stage).
inline int group_size(const std::string& group, const MemoryQuery& q) {
    return group == "tensor" ? q.tp : group == "pipe" ? q.pp() : group == "tied" ? 2 : q.world;
}

// Where the ranks are: sharing one device of a measured profile (emulated), or
// one per device of a cluster.
struct Placement {
    bool emulated = true;
    int world = 1;  // dp * tp * pp
};

class OpTimer {
  public:
    OpTimer(const Profile& p, const MemoryQuery& q, const Placement& pl) : prof(p), q(q), pl(pl) {
        s = (double)q.dtype_bytes;
        // a spec profile's kernel efficiencies: its own table, then efficiency_from's, to a measured profile
        for (const Profile* at = &p; !at->measured;) {
            CHECK(!at->efficiency_from.empty(), "%s: a profile from specifications needs efficiency_from",
                  at->path.c_str());
            refs.push_back(std::make_unique<Profile>(load_profile(profile_sibling(*at, at->efficiency_from))));
            at = refs.back().get();
            CHECK(refs.size() < 8, "%s: efficiency_from goes round in a circle", p.path.c_str());
        }
        if (pl.emulated) {
            int most = 1;
            for (const auto& c : p.kernels) most = std::max(most, atoi(c.first.c_str() + 1));
            ctx_ranks = std::min(pl.world, most);
            oversubscribed = (double)pl.world / ctx_ranks;
        }
    }
    const Profile& prof;
    const MemoryQuery q;
    const Placement pl;
    std::vector<std::unique_ptr<Profile>> refs;  // spec profiles: the efficiency_from chain, a measured one last
    int interpolated = 0;          // ops whose exact shape was not measured
    std::set<std::string> unmeasured;  // spec profiles: kernel kinds timed as device copies (efficiency)
    double oversubscribed = 1;     // emulated ranks beyond the cores: N / R

    double seconds(const StepOp& op) {
        if (op.kind == OpKind::HostWait || op.kind == OpKind::Send) return 0;  // a send's cost is its receive's
        StepOp as;
        const Profile& timed = refs.empty() ? prof : *refs.back();  // the measured profile at the chain's end
        if (variant_stand_in(op, as) && !timed_anywhere(timed, op.name)) return seconds(as);
        if (op.collective()) return collective_seconds(op);
        if (op.kind == OpKind::Recv && !pl.emulated) {  // stages are dp x tp ranks apart: another node, or the same
            bool across = (long)q.world * q.tp >= prof.devices_per_node;
            double bw = across ? prof.network_gbs / prof.devices_per_node : prof.link_gbs;
            return (across ? prof.network_latency_us : prof.link_latency_us) * 1e-6 + op.bytes / (bw * 1e9);
        }
        if (op.disk()) {
            // NVMe offload: the machine's disk at its rate, shared by the ranks on the machine (every emulated
            // rank; a node's devices), which read and write alike at once
            const double gbs = op.kind == OpKind::DiskRead ? prof.disk_read_gbs : prof.disk_write_gbs;
            CHECK(gbs > 0, "%s has no disk rates (disk.read_gbs, disk.write_gbs): --calibrate with --offload_optimizer "
                  "nvme measures them on its --nvme_path", prof.path.c_str());
            const int sharing = pl.emulated ? pl.world : std::min(pl.world, prof.devices_per_node);
            return op.bytes / (gbs * 1e9) * sharing;
        }
        if (pl.emulated) return measured(prof, "r" + std::to_string(ctx_ranks), op.key(), op.name, op.dims) *
                                oversubscribed;
        if (op.transfer()) return prof.pcie_latency_us * 1e-6 + op.bytes / (prof.pcie_gbs * 1e9);
        std::string b = base_kind(op.name);
        if (b == "cpu_adamw") return op.dims[0] / prof.cpu_adamw_params_per_s;
        if (b == "host_add" || b == "host_sumsq") return op_bytes(op.name, op.dims, s) / (prof.host_gbs * 1e9);
        // a kernel at the efficiency its kind reached elsewhere, on this device's peak or bandwidth
        double flops = op_flops(op.name, op.dims), eff = efficiency(op);
        return prof.compute_scale * (flops > 0 ? flops / (eff * prof.peak_tflops * 1e12)
                                               : op_bytes(op.name, op.dims, s) / (eff * prof.hbm_gbs * 1e9));
    }

    // Rate over peak (FLOP/s or bytes/s) of op's kind: from a profile on the chain that states it,
    // else from the measured profile at its end, at op's shape (or interpolated by work).
    double efficiency(const StepOp& op) {
        std::string b = base_kind(op.name);
        // a fused GELU is a matmul's epilogue: nothing a GPU notices, but a CPU computes a tanh per element,
        // which would misstate a GPU's matmul; it takes the plain matmul's efficiency
        if (b == "matmul_fwd_gelu" || b == "matmul_bwd_gelu") b = b.substr(0, 10);
        // a device with a published GEMM benchmark: the efficiency at this GEMM's work (a backward is two)
        if (!prof.matmul_curve.empty() && (b == "matmul_fwd" || b == "matmul_bwd"))
            return curve_at(prof.matmul_curve, op_flops(op.name, op.dims) / (b == "matmul_bwd" ? 2 : 1));
        for (size_t i = 0;; i++) {
            const Profile* at = i == 0 ? &prof : refs[i - 1].get();
            auto e = at->efficiency.find(b);
            if (e != at->efficiency.end()) return e->second;
            if (!at->measured) continue;
            std::string kind = b + (op.name == base_kind(op.name) ? "" : at->dtype == "fp32" ? "_f32" : "_16");
            double es = at->dtype == "fp32" ? 4 : 2;
            // timed alone if it was; else with k ranks at once, which shared the device: a k-th of their time
            int k = 1;
            while (!has_kind(*at, "r" + std::to_string(k), kind) && k < 1024) k *= 2;
            if (k == 1024 && op_flops(kind, op.dims) == 0 && b != "copy") {  // a kind it never timed (-r 1's GELU):
                unmeasured.insert(kind + " on " + at->path);                 // its bytes as a device copy there
                StepOp copy = step_op(OpKind::Copy, op.lane);
                copy.dims = {(long)(op_bytes(op.name, op.dims, s) / 2)};
                return efficiency(copy);
            }
            CHECK(k < 1024, "%s has no measurement of %s (the kernel efficiencies of %s come from it)",
                  at->path.c_str(), kind.c_str(), prof.path.c_str());
            double t = measured(*at, "r" + std::to_string(k), StepOp::op_key(kind, op.dims), kind, op.dims) / k;
            double work = op_work(kind, op.dims, es);
            double eff = op_flops(kind, op.dims) > 0 ? work / t / (at->peak_tflops * 1e12) : work / t / (at->hbm_gbs * 1e9);
            return std::min(eff, 1.0);
        }
    }
    // y at x on a curve of (x, y) points sorted by x, linear in log(x) between them, held at the ends
    static double curve_at(const std::vector<std::pair<double, double>>& c, double x) {
        if (x <= c.front().first) return c.front().second;
        if (x >= c.back().first) return c.back().second;
        size_t i = 1;
        while (c[i].first < x) i++;
        const double f = std::log(x / c[i - 1].first) / std::log(c[i].first / c[i - 1].first);
        return c[i - 1].second + f * (c[i].second - c[i - 1].second);
    }
    static bool timed_anywhere(const Profile& p, const std::string& kind) {
        return std::any_of(p.kernels.begin(), p.kernels.end(),
                           [&](const auto& c) { return has_kind(p, c.first, kind); });
    }
    static bool has_kind(const Profile& p, const std::string& ctx, const std::string& kind) {
        auto c = p.kernels.find(ctx);
        return c != p.kernels.end() && std::any_of(c->second.begin(), c->second.end(), [&](const auto& e) {
                   return e.first.compare(0, kind.size() + 1, kind + " ") == 0;
               });
    }

  private:
    double s = 4;
    int ctx_ranks = 1;
    // per (table, context, kind): measured (work, seconds), sorted by work
    std::map<std::string, std::vector<std::pair<double, double>>> curves;

    double measured(const Profile& p, const std::string& ctx, const std::string& key, const std::string& kind,
                    const std::vector<long>& dims) {
        auto c = p.kernels.find(ctx);
        CHECK(c != p.kernels.end(), "%s has no measurements for %s ranks at once: calibrate it (--calibrate)",
              p.path.c_str(), ctx.c_str() + 1);
        auto e = c->second.find(key);
        if (e != c->second.end()) return e->second;
        interpolated++;
        double es = p.dtype == "fp32" ? 4 : 2;
        return interpolate(p, c->second, p.path + ctx + kind, kind, op_work(kind, dims, &p == &prof ? s : es),
                           [&](const std::string& k2) -> double {
                               std::string kk;
                               std::vector<long> d2 = parse_dims(k2, kk);
                               return kk == kind ? op_work(kk, d2, &p == &prof ? s : es) : -1;
                           });
    }

    template <typename WorkOf>
    double interpolate(const Profile& p, const std::map<std::string, double>& table, const std::string& id,
                       const std::string& what, double work, WorkOf work_of) {
        std::vector<std::pair<double, double>>& pts = curves[id];
        if (pts.empty()) {
            for (const auto& e : table) {
                double w = work_of(e.first);
                if (w > 0 && e.second > 0) pts.push_back({w, e.second});
            }
            std::sort(pts.begin(), pts.end());
        }
        CHECK(!pts.empty(), "%s has no measurement of %s: calibrate with the run's flags (--calibrate)",
              p.path.c_str(), what.c_str());
        if (work <= pts.front().first) return pts.front().second * (pts.size() > 1 ? 1.0 : work / pts.front().first);
        if (work >= pts.back().first) return pts.back().second * work / pts.back().first;  // the last rate
        size_t i = 1;
        while (pts[i].first < work) i++;
        double w0 = pts[i - 1].first, w1 = pts[i].first;
        double r0 = std::log(w0 / pts[i - 1].second), r1 = std::log(w1 / pts[i].second);
        double f = (std::log(work) - std::log(w0)) / (std::log(w1) - std::log(w0));
        return work / std::exp(r0 + f * (r1 - r0));
    }

    double collective_seconds(const StepOp& op) {
        bool tensor = op.group == "tensor";
        int g = group_size(op.group, q);
        if (pl.emulated) {
            std::string ctx = "N" + std::to_string(pl.world) + "g" + std::to_string(g);
            auto c = prof.collectives.find(ctx);
            CHECK(c != prof.collectives.end(),
                  "%s has no collectives of %d ranks in groups of %d: calibrate with the run's flags (--calibrate)",
                  prof.path.c_str(), pl.world, g);
            std::string key = op.name + " " + std::to_string(op.bytes);
            auto e = c->second.find(key);
            if (e != c->second.end()) return e->second;
            interpolated++;
            return interpolate(prof, c->second, prof.path + ctx + op.name, op.name, (double)op.bytes,
                               [&](const std::string& k2) -> double {
                                   size_t sp = k2.find(' ');
                                   return k2.substr(0, sp) == op.name ? atof(k2.c_str() + sp + 1) : -1;
                               });
        }
        int m = 1, n = 1;
        if (op.group == "pipe" || op.group == "tied")  // one rank per stage, dp x tp apart
            group_span(false, q.world * q.tp, g, prof.devices_per_node, m, n);
        else
            group_span(tensor, q.tp, q.world, prof.devices_per_node, m, n);
        Tier intra{prof.link_gbs * 1e9, prof.link_latency_us * 1e-6};
        Tier inter{prof.network_gbs * 1e9 / prof.devices_per_node, prof.network_latency_us * 1e-6};
        double t = cluster_collective_seconds(op.name, (double)op.bytes, m, n, intra, inter);
        if (op.kind == OpKind::ReduceScatter && op.group == "data" && q.stage == 2 && prof.reduce_scatter_bucket > 0) {
            // a reduce to each of the g ranks per bucket, each a ring reduce of g - 1 steps: the same bytes,
            // g times the latency of a reduce-scatter, per bucket
            const double buckets = op.bytes / (prof.reduce_scatter_bucket * q.dtype_bytes);
            t += buckets * g * (g - 1) * (n > 1 ? inter : intra).latency_s;
        }
        return t;
    }
};

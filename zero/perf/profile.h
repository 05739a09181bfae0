// A hardware profile: what the step-time model knows about a machine, read from
// a small JSON file (zero/perf/profiles/). Two kinds:
//
//   measured  written by `--calibrate FILE` on this build's device (the CPU
//             build's cores, or one GPU): the time of every kernel, transfer and
//             host operation of the calibrated runs, each timed alone while
//             r ranks run it at once ("r1", "r2", ...: emulated ranks share the
//             device), and of every emulated collective in a world of N ranks
//             in groups of g ("N4g2"). Emulated runs are predicted from these.
//   spec      a cluster from public specifications: a device (peak dense
//             TFLOP/s per dtype, memory, memory bandwidth), a node (devices, the
//             link's bandwidth per device and latency), a network (bandwidth
//             per node, latency), a host (PCIe, CPU AdamW rate). Kernel times
//             come from a measured profile's efficiencies (`efficiency_from`)
//             applied to this device's peak and bandwidth, and, where the
//             profile names an `anchor` (a published step time of one device),
//             all scaled by one factor so that the anchor run takes what was
//             published (zero/run/predict_report.h, anchored_profile). A
//             `software` section says how the modelled software schedules its
//             communication (whether the data group's collectives overlap the
//             backward pass).
//
// Every number says where it came from in the file's "sources".
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "zero/base/common.h"
#include "zero/base/csv.h"
#include "zero/base/json.h"

struct Profile {
    std::string path, name, about;
    bool measured = false;   // by --calibrate on this build (else: specifications)
    bool synchronous = false;  // the CPU build: every stream is the rank's own thread
    // device
    std::string device;
    double memory_gib = 0, peak_tflops = 0, hbm_gbs = 0;  // peak in the dtype the profile is for
    std::string dtype = "fp32";
    int cores = 1;  // measured: the cores the build's ranks share (CPU), else 1
    // node, network, host
    int devices_per_node = 1;
    double link_gbs = 0, link_latency_us = 0;    // within a node, per device, one direction
    double network_gbs = 0, network_latency_us = 0;  // between nodes, per node, one direction
    double pcie_gbs = 0, pcie_latency_us = 0, host_memory_gib = 0;
    double cpu_adamw_params_per_s = 0;  // spec: the host's AdamW over all its cores
    double host_gbs = 0;                // spec: host memory bandwidth (host adds, norms)
    double disk_read_gbs = 0, disk_write_gbs = 0;  // NVMe offload's disk, all its ranks' requests at once (--calibrate)
    std::string efficiency_from;        // spec: the profile whose kernel efficiencies apply (followed to a measured one)
    std::map<std::string, double> efficiency;  // spec: a kernel kind's efficiency measured elsewhere (before efficiency_from)
    // spec: the kernels' level from a published step of one device: the trainer's flags for that run, its rate
    // (counted as Megatron-LM counts, megatron_flops) and the peak of the device it ran on
    std::string anchor_flags;
    double anchor_tflops = 0, anchor_peak_tflops = 0;
    double compute_scale = 1;  // every kernel's time times this (the anchor's factor, once solved)
    // spec: the device's matmul efficiency by work (FLOPs of one GEMM, efficiency), sorted: a published
    // benchmark of its GEMMs (matmul_curve: a CSV beside the profile, m,n,k,ms), where the profile names one
    std::vector<std::pair<double, double>> matmul_curve;
    bool overlap_data_parallel = true;  // the software overlaps the data group's collectives with compute
    // the software's stage-2 reduce-scatter is one reduce to each rank per bucket of this many elements
    // (DeepSpeed 0.2); 0: NCCL's reduce-scatter
    double reduce_scatter_bucket = 0;
    // measured tables: context -> key -> seconds
    std::map<std::string, std::map<std::string, double>> kernels, collectives;
};

// A profile's folder-relative neighbour (efficiency_from and matmul_curve name files beside it).
inline std::string profile_sibling(const Profile& p, const std::string& name) {
    size_t slash = p.path.rfind('/');
    return slash == std::string::npos ? name : p.path.substr(0, slash + 1) + name;
}

inline Profile load_profile(const std::string& path) {
    JsonValue j = parse_json_file(path);
    Profile p;
    p.path = path;
    auto num = [&](const JsonValue& o, const char* key, double& out) {
        if (const JsonValue* v = o.find(key)) {
            CHECK(v->is_number(), "%s: %s must be a number", v->where().c_str(), key);
            out = v->as_number();
        }
    };
    auto str = [&](const JsonValue& o, const char* key, std::string& out) {
        if (const JsonValue* v = o.find(key)) {
            CHECK(v->is_string(), "%s: %s must be a string", v->where().c_str(), key);
            out = v->as_string();
        }
    };
    CHECK(j.is_object(), "%s: a profile is a JSON object", path.c_str());
    str(j, "name", p.name);
    str(j, "about", p.about);
    if (const JsonValue* m = j.find("measured")) p.measured = m->is_bool() && m->as_bool();
    if (const JsonValue* m = j.find("synchronous")) p.synchronous = m->is_bool() && m->as_bool();
    double cores = 1, dpn = 1;
    const struct { const char* section; const char* key; double* out; } numbers[] = {
        {"device", "memory_gib", &p.memory_gib}, {"device", "peak_tflops", &p.peak_tflops},
        {"device", "memory_gbs", &p.hbm_gbs}, {"device", "cores", &cores}, {"node", "devices", &dpn},
        {"node", "link_gbs", &p.link_gbs}, {"node", "link_latency_us", &p.link_latency_us},
        {"network", "node_gbs", &p.network_gbs}, {"network", "latency_us", &p.network_latency_us},
        {"host", "pcie_gbs", &p.pcie_gbs}, {"host", "pcie_latency_us", &p.pcie_latency_us},
        {"host", "memory_gib", &p.host_memory_gib}, {"host", "cpu_adamw_params_per_s", &p.cpu_adamw_params_per_s},
        {"host", "memory_gbs", &p.host_gbs}, {"disk", "read_gbs", &p.disk_read_gbs},
        {"disk", "write_gbs", &p.disk_write_gbs}, {"anchor", "tflops", &p.anchor_tflops},
        {"anchor", "peak_tflops", &p.anchor_peak_tflops},
        {"software", "reduce_scatter_by_reduces_bucket", &p.reduce_scatter_bucket}};
    const struct { const char* section; const char* key; std::string* out; } texts[] = {
        {"device", "name", &p.device}, {"device", "dtype", &p.dtype}, {"anchor", "flags", &p.anchor_flags}};
    for (const auto& t : texts)
        if (const JsonValue* section = j.find(t.section)) str(*section, t.key, *t.out);
    for (const auto& n : numbers)
        if (const JsonValue* section = j.find(n.section)) num(*section, n.key, *n.out);
    if (const JsonValue* a = j.find("anchor"))
        CHECK(!p.anchor_flags.empty() && p.anchor_tflops > 0 && p.anchor_peak_tflops > 0,
              "%s: an anchor needs flags, tflops and peak_tflops", a->where().c_str());
    if (const JsonValue* sw = j.find("software")) {
        if (const JsonValue* v = sw->find("overlap_data_parallel")) {
            CHECK(v->is_bool(), "%s: overlap_data_parallel must be true or false", v->where().c_str());
            p.overlap_data_parallel = v->as_bool();
        }
    }
    std::string curve;
    str(j, "matmul_curve", curve);
    if (!curve.empty()) {
        CHECK(p.peak_tflops > 0, "%s: a matmul_curve needs device.peak_tflops", path.c_str());
        CsvTable t = read_csv_table(profile_sibling(p, curve));
        for (size_t i = 0; i < t.rows.size(); i++) {
            double m = t.num(i, "m"), n = t.num(i, "n"), k = t.num(i, "k"), ms = t.num(i, "ms");
            // GEMV-like rows (a dimension under 64) are nothing a transformer layer's matmul is
            if (std::min(m, std::min(n, k)) < 64 || ms <= 0) continue;
            p.matmul_curve.push_back({2 * m * n * k, 2 * m * n * k / (ms * 1e-3) / (p.peak_tflops * 1e12)});
        }
        std::sort(p.matmul_curve.begin(), p.matmul_curve.end());
        CHECK(!p.matmul_curve.empty(), "%s: %s has no matmul of every dimension 64 or more", path.c_str(), curve.c_str());
    }
    p.cores = (int)cores, p.devices_per_node = (int)dpn;
    str(j, "efficiency_from", p.efficiency_from);
    if (const JsonValue* e = j.find("efficiency")) {
        CHECK(e->is_object(), "%s: efficiency maps kernel kinds to fractions of the peak", e->where().c_str());
        for (const JsonMember& m : e->members()) {
            CHECK(m.value.is_number() && m.value.as_number() > 0 && m.value.as_number() <= 1,
                  "%s: %s: an efficiency in (0, 1] expected", m.value.where().c_str(), m.key.c_str());
            p.efficiency[m.key] = m.value.as_number();
        }
    }
    for (const char* table : {"kernels", "collectives"}) {
        const JsonValue* t = j.find(table);
        if (!t) continue;
        CHECK(t->is_object(), "%s: %s must be an object of contexts", t->where().c_str(), table);
        auto& dst = std::string(table) == "kernels" ? p.kernels : p.collectives;
        for (const JsonMember& ctx : t->members()) {
            CHECK(ctx.value.is_object(), "%s: a context maps keys to seconds", ctx.value.where().c_str());
            for (const JsonMember& e : ctx.value.members()) {
                CHECK(e.value.is_number() && e.value.as_number() >= 0, "%s: %s: seconds >= 0 expected",
                      e.value.where().c_str(), e.key.c_str());
                dst[ctx.key][e.key] = e.value.as_number();
            }
        }
    }
    CHECK(p.measured || p.peak_tflops > 0, "%s: a profile from specifications needs device.peak_tflops", path.c_str());
    return p;
}

// Writes a measured profile (the calibration's output), tables sorted by key,
// whole or not at all; its folder is made if need be.
inline void save_profile(const Profile& p, const std::string& path) {
    size_t slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) make_dir(path.substr(0, slash));
    std::string text =
        strf("{\n  \"name\": \"%s\",\n  \"about\": \"%s\",\n  \"measured\": true,\n  \"synchronous\": %s,\n"
             "  \"device\": {\"name\": \"%s\", \"dtype\": \"%s\", \"cores\": %d, \"peak_tflops\": %.6g, "
             "\"memory_gbs\": %.6g, \"memory_gib\": %.6g},\n",
             p.name.c_str(), p.about.c_str(), p.synchronous ? "true" : "false", p.device.c_str(), p.dtype.c_str(),
             p.cores, p.peak_tflops, p.hbm_gbs, p.memory_gib);
    if (p.disk_read_gbs > 0)
        text += strf("  \"disk\": {\"read_gbs\": %.6g, \"write_gbs\": %.6g},\n", p.disk_read_gbs, p.disk_write_gbs);
    const char* names[2] = {"kernels", "collectives"};
    const std::map<std::string, std::map<std::string, double>>* tables[2] = {&p.kernels, &p.collectives};
    for (int t = 0; t < 2; t++) {
        text += std::string("  \"") + names[t] + "\": {";
        bool first_ctx = true;
        for (const auto& ctx : *tables[t]) {
            text += std::string(first_ctx ? "" : ",") + "\n    \"" + ctx.first + "\": {";
            bool first = true;
            for (const auto& e : ctx.second)
                text += strf("%s\n      \"%s\": %.6e", first ? "" : ",", e.first.c_str(), e.second), first = false;
            text += "\n    }", first_ctx = false;
        }
        text += std::string("\n  }") + (t == 0 ? "," : "") + "\n";
    }
    write_file_atomically(path, text + "}\n");
}

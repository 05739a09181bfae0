// --trace FILE: one step's timeline in the Trace Event format (PyTorch's
// profiler's JSON), for Perfetto (ui.perfetto.dev) and Chromium's DevTools
// Performance panel: a process per rank, a track per lane, each op a slice with
// its kind, lane, unit, bytes, shape and the ops it waits for, an arrow from
// each send to the receive it meets. The times are a dry run's as the step-time
// model placed them (--predict), or a real run's as each op ran
// (zero/run/step_trace.h; there a pipeline group's sends and receives and the
// disk's ring have tracks of their own: they run at once). Written by the two
// viewers' import rules (zero/README.md, "The trace").
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/json.h"
#include "zero/perf/simulate.h"

// Tracks beyond the lanes (0 .. NUM_LANES-1): a real run's concurrent work.
constexpr int DISK_BUFFER_TRACK = 16;  // + the ring buffer a tile's read or write went through
constexpr int PIPE_TRACK = 1024;       // + 2 x the peer stage, + 1 for receives: sends to and receives from it
inline std::string track_name(int track) {
    if (track < NUM_LANES) return lane_name((Lane)track);
    if (track < PIPE_TRACK) return strf("disk, buffer %d", track - DISK_BUFFER_TRACK);
    return strf((track - PIPE_TRACK) % 2 ? "receives from stage %d" : "sends to stage %d", (track - PIPE_TRACK) / 2);
}

// One rank's ops of the step, each with its start and end (seconds; NaN: not timed, left out) and track.
// `line`: its (data, tensor) place, the same on every stage (a send meets the receive of its line's rank).
struct TracedRank {
    int rank = 0, stage = 0, line = 0;
    std::string name;  // what the viewer calls it ("rank 3, stage 1")
    std::vector<StepOp> ops;
    std::vector<double> start, end;
    std::vector<int> track;
};

// A time of whole nanoseconds in the format's microseconds, exactly ("1234.567").
inline std::string trace_us(int64_t ns) { return strf("%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000)); }
// The dur of a slice [s, e) (ns) that no viewer reads past e: Perfetto's s + dur is at most e, and so is
// DevTools' sum of the two as doubles (where the next slice starts at the earliest).
inline std::string trace_dur(int64_t s, int64_t e) {
    int64_t d = e - s;
    while (d > 0 && std::stod(trace_us(s)) + std::stod(trace_us(d)) > std::stod(trace_us(e))) d--;
    return trace_us(d);
}

// Writes the ranks' step to `path` (whole, or not at all); `about` says what the times are, `threads` what
// runs the lanes, step_s the step's time.
inline void write_trace(const std::string& path, const std::vector<TracedRank>& ranks, const std::string& about,
                        const std::string& threads, double step_s) {
    double origin = INFINITY;
    for (const TracedRank& r : ranks)
        for (double t : r.start)
            if (!std::isnan(t)) origin = std::min(origin, t);
    // each op's [start, end) in whole ns (-1: not timed)
    std::vector<std::vector<int64_t>> from(ranks.size()), to(ranks.size());
    int64_t last = 0;
    for (size_t k = 0; k < ranks.size(); k++)
        for (size_t i = 0; i < ranks[k].ops.size(); i++) {
            const bool timed = !std::isnan(ranks[k].start[i]) && !std::isnan(ranks[k].end[i]);
            from[k].push_back(timed ? std::llround((ranks[k].start[i] - origin) * 1e9) : -1);
            to[k].push_back(timed ? std::max(from[k][i], (int64_t)std::llround((ranks[k].end[i] - origin) * 1e9)) : -1);
            last = std::max(last, to[k][i]);
        }
    // a slice's category (a pipeline's by direction: a send and the receive it meets, and only they, share one)
    auto category = [&](const TracedRank& r, const StepOp& op) {
        if (!op.p2p()) return std::string(op_category(op));
        const bool send = op.kind == OpKind::Send;
        return strf("pipeline, stage %d to %d", send ? r.stage : op.peer, send ? op.peer : r.stage);
    };
    // the arrows: the k-th send from stage a to b on a line meets the k-th receive there, which starts at least
    // a nanosecond after it
    std::map<std::tuple<int, int, int>, std::vector<std::pair<size_t, size_t>>> sends, recvs;  // (line, from, to)
    for (size_t k = 0; k < ranks.size(); k++)
        for (size_t i = 0; i < ranks[k].ops.size(); i++) {
            const StepOp& op = ranks[k].ops[i];
            const int a = ranks[k].stage, b = op.peer;
            if (op.p2p() && from[k][i] >= 0)
                (op.kind == OpKind::Send ? sends[{ranks[k].line, a, b}] : recvs[{ranks[k].line, b, a}]).push_back({k, i});
        }
    std::map<std::pair<size_t, size_t>, int> flow_of;  // (rank, op) -> its arrow
    int flows = 0;
    for (const auto& [key, recv] : recvs)
        for (size_t n = 0; n < recv.size() && n < sends[key].size(); n++, flows++) {
            const auto [k, i] = recv[n];
            const auto [sk, si] = sends[key][n];
            from[k][i] = std::min(std::max(from[k][i], from[sk][si] + 1), to[k][i]);
            flow_of[recv[n]] = flow_of[sends[key][n]] = flows;
        }
    std::string out = strf("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"about\": %s, \"threads\": %s, \"step_s\": "
                           "%.9g},\n\"traceEvents\": [\n", json_quoted(about).c_str(), json_quoted(threads).c_str(), step_s);
    auto event = [&](const std::string& e) { out += (out.back() == '\n' ? "" : ",\n") + e; };
    // the ranks in order: each one's busiest track made one busier than any by process-wide instants, first
    std::vector<std::map<int, int>> per_track(ranks.size());
    int busiest = 0;
    for (size_t k = 0; k < ranks.size(); k++) {
        for (size_t i = 0; i < ranks[k].ops.size(); i++) per_track[k][ranks[k].track[i]] += from[k][i] >= 0;
        for (const auto& [t, n] : per_track[k]) busiest = std::max(busiest, n);
    }
    for (size_t k = 0; k < ranks.size(); k++) {
        const TracedRank& r = ranks[k];
        event(strf("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": %s}}", r.rank,
                   json_quoted(r.name).c_str()));
        event(strf("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %d, \"args\": {\"sort_index\": %d}}",
                   r.rank, r.rank));
        for (const auto& [t, n] : per_track[k])
            event(strf("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": %s}}",
                       r.rank, t, json_quoted(track_name(t)).c_str()));
        const auto top = std::max_element(per_track[k].begin(), per_track[k].end(),
                                          [](const auto& a, const auto& b) { return a.second < b.second; });
        for (int n = top == per_track[k].end() ? busiest + 1 : top->second; n <= busiest; n++)
            event(strf("{\"ph\": \"I\", \"s\": \"p\", \"name\": \"(ranks in order in DevTools)\", \"cat\": \"order\", "
                       "\"pid\": %d, \"tid\": %d, \"ts\": %s}", r.rank, top->first, trace_us(last).c_str()));
    }
    // the slices in time order, zero-length ones last at their time, each with its flow event after it
    std::vector<std::tuple<int64_t, bool, size_t, size_t, std::string>> order;  // (ts, zero-length, rank, op, dur)
    for (size_t k = 0; k < ranks.size(); k++)
        for (size_t i = 0; i < ranks[k].ops.size(); i++) {
            if (from[k][i] < 0) continue;
            const std::string dur = trace_dur(from[k][i], to[k][i]);
            order.push_back({from[k][i], dur == "0.000", k, i, dur});
        }
    std::sort(order.begin(), order.end());
    for (const auto& [start, zero, k, i, dur] : order) {
        const TracedRank& r = ranks[k];
        const StepOp& op = r.ops[i];
        std::string after;
        for (int a : op.after) after += (after.empty() ? "" : ", ") + std::to_string(a);
        event(strf("{\"ph\": \"X\", \"name\": %s, \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %s, \"dur\": %s, "
                   "\"args\": {\"op\": %zu, \"kind\": \"%s\", \"lane\": \"%s\", \"unit\": %d, \"bytes\": %llu, "
                   "\"group\": %s, \"peer\": %d, \"shape\": \"%s\", \"after\": [%s]}}",
                   json_quoted(op.name).c_str(), category(r, op).c_str(), r.rank, r.track[i], trace_us(start).c_str(),
                   dur.c_str(), i, op_kind_name(op.kind), lane_name(op.lane), op.unit,
                   (unsigned long long)op.bytes, json_quoted(op.group).c_str(), op.peer,
                   StepOp::op_key("", op.dims).c_str() + (op.dims.empty() ? 0 : 1), after.c_str()));
        if (auto f = flow_of.find({k, i}); f != flow_of.end())  // (the receive's end binds to its enclosing slice)
            event(strf("{\"ph\": \"%s\", %s\"id\": %d, \"name\": \"send\", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, "
                       "\"ts\": %s}", op.kind == OpKind::Send ? "s" : "f", op.kind == OpKind::Send ? "" : "\"bp\": \"e\", ",
                       f->second, category(r, op).c_str(), r.rank, r.track[i], trace_us(start).c_str()));
    }
    out += "\n]}\n";
    make_dir_for(path);
    write_file_atomically(path, out);
}

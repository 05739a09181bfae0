// --trace FILE: one step's timeline in the Trace Event format (the JSON that
// PyTorch's profiler writes), which Perfetto (ui.perfetto.dev) and
// Chromium's DevTools Performance panel open: a track per rank and lane (compute stream, comm
// stream, the rank's thread, its host-task worker, the delayed update, the
// disk), each op a slice named by what it is, with its kind, unit, bytes,
// shape and the ops it waits for; an arrow from each send to the end of the
// receive it meets. The times are a dry run's laid out by the step-time model
// (--predict PROFILE: the predicted step of any configuration), or a real
// run's, each op where it ran and for how long (a captured step, zero/run/
// step_trace.h).
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/ops.h"

// One rank's ops of the step, each with its start and end (seconds; NaN: not
// timed, left out). `line`: its (data, tensor) place, the same on every stage
// (a send meets the receive of the rank of its line on the peer stage).
struct TracedRank {
    int rank = 0, stage = 0, line = 0;
    std::string name;  // what the viewer calls it ("rank 3, stage 1")
    std::vector<StepOp> ops;
    std::vector<double> start, end;
};

// Writes the ranks' step to `path`; `about` says what the times are, step_s the step's time.
inline void write_trace(const std::string& path, const std::vector<TracedRank>& ranks, const std::string& about,
                        double step_s) {
    double origin = INFINITY;
    for (const TracedRank& r : ranks)
        for (double t : r.start)
            if (!std::isnan(t)) origin = std::min(origin, t);
    if (path.rfind('/') != std::string::npos && path.rfind('/') > 0) make_dir(path.substr(0, path.rfind('/')));
    FILE* f = fopen(path.c_str(), "w");
    CHECK(f, "cannot write the trace %s: %s", path.c_str(), strerror(errno));
    auto us = [&](double t) { return (t - origin) * 1e6; };
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"about\": \"%s\", \"step_s\": %.9g},\n\"traceEvents\": [\n",
            about.c_str(), step_s);
    bool first = true;
    auto event = [&](const char* format, auto... v) {  // one event, after a comma but the first
        fprintf(f, "%s%s", first ? "" : ",\n", strf(format, v...).c_str()), first = false;
    };
    std::map<std::pair<int, int>, int> rank_at;  // (stage, line) -> index in ranks
    for (size_t k = 0; k < ranks.size(); k++) rank_at[{ranks[k].stage, ranks[k].line}] = (int)k;
    // (line, from stage, to stage) -> each send's start and lane
    std::map<std::tuple<int, int, int>, std::vector<std::pair<double, int>>> sends;
    for (const TracedRank& r : ranks)
        for (size_t i = 0; i < r.ops.size(); i++)
            if (r.ops[i].kind == OpKind::Send && !std::isnan(r.start[i]))
                sends[{r.line, r.stage, r.ops[i].peer}].push_back({r.start[i], (int)r.ops[i].lane});
    std::map<std::tuple<int, int, int>, int> received;
    int flow = 0;
    for (const TracedRank& r : ranks) {
        event("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"%s\"}}", r.rank,
              r.name.c_str());
        event("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %d, \"args\": {\"sort_index\": %d}}", r.rank,
              r.rank);
        for (int l = 0; l < NUM_LANES; l++)
            event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                  r.rank, l, lane_name((Lane)l));
        for (size_t i = 0; i < r.ops.size(); i++) {
            const StepOp& op = r.ops[i];
            if (std::isnan(r.start[i]) || std::isnan(r.end[i])) continue;
            std::string after;
            for (int a : op.after) after += (after.empty() ? "" : ", ") + std::to_string(a);
            event("{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                  "\"dur\": %.3f, \"args\": {\"op\": %zu, \"unit\": %d, \"bytes\": %llu, \"group\": \"%s\", "
                  "\"peer\": %d, \"shape\": \"%s\", \"after\": [%s]}}",
                  op.name.c_str(), op_kind_name(op.kind), r.rank, (int)op.lane, us(r.start[i]),
                  (r.end[i] - r.start[i]) * 1e6, i, op.unit, (unsigned long long)op.bytes, op.group.c_str(), op.peer,
                  StepOp::op_key("", op.dims).c_str() + (op.dims.empty() ? 0 : 1), after.c_str());
            if (op.kind != OpKind::Recv) continue;  // an arrow from the send it meets
            const std::tuple<int, int, int> from{r.line, op.peer, r.stage};
            const int n = received[from]++;
            auto s = sends.find(from);
            auto sender = rank_at.find({op.peer, r.line});
            if (s == sends.end() || n >= (int)s->second.size() || sender == rank_at.end()) continue;
            event("{\"ph\": \"s\", \"name\": \"send\", \"cat\": \"pipeline\", \"id\": %d, \"pid\": %d, \"tid\": %d, "
                  "\"ts\": %.3f}", flow, ranks[sender->second].rank, s->second[n].second, us(s->second[n].first));
            event("{\"ph\": \"f\", \"bp\": \"e\", \"name\": \"send\", \"cat\": \"pipeline\", \"id\": %d, \"pid\": %d, "
                  "\"tid\": %d, \"ts\": %.3f}", flow++, r.rank, (int)op.lane,
                  std::max(us(r.start[i]), us(r.end[i]) - 0.001));  // (when its data has come: it may wait)
        }
    }
    fprintf(f, "\n]}\n");
    CHECK(fclose(f) == 0, "cannot write the trace %s", path.c_str());
}

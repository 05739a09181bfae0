// A --trace file read by the import rules of the two viewers it is written
// for, replayed here (neither can run in a test: Perfetto's trace processor
// fetches a binary at run time, DevTools needs a browser; test_trace's
// `browser` case loads one trace in DevTools itself where Chromium is
// installed). From their sources (Perfetto's src/trace_processor: the JSON
// tokenizer, the sorter, the slice and flow trackers; Chromium DevTools'
// front_end/models/trace: Helpers.Trace's sort, TreeHelpers.treify,
// FlowsHandler):
//
// Perfetto: a time is rounded to whole nanoseconds (ts and dur each:
//   llround(us x 1000), or x 1000 when it is whole); events are taken in time
//   order, at one time complete ('X') slices first, longest first, then the
//   rest in file order. On a thread's track a slice ends at ts + dur; one
//   that starts before the slice on top of the track's stack ends and ends
//   after it is dropped (newer versions spill it onto an overflow track with
//   an import error: it is not where it ran either way); slices that have
//   ended (end < ts, or end == ts unless both are instants) are popped when
//   a slice comes. A flow event binds to the slice on top of its track's
//   stack when it is taken ('f' with "bp": "e"; without, to the next slice).
// DevTools (Chromium 156; its front_end/models/trace handlers and the
//   timeline panel's track appender, each rule also seen in the browser on
//   small traces): on a track the slices are sorted by ts, then the later end
//   first (as doubles: ts + dur), else in file order; one that starts inside
//   the one on top of the stack and ends after it is dropped. Flow events are
//   taken in file order (an end with no open start is lost); each binds to
//   the first event in the file with its exact ts, pid, tid and category; a
//   flow's bound events are kept by their times and joined in file order.
//   Processes are shown in the order of their busiest track's events (X and
//   I, whatever their scope), ties by the file order of their first such
//   event; process_sort_index is not read.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "zero/base/json.h"

struct ViewerEvent {
    char ph = 0;
    std::string name, cat, kind;  // kind: a slice's args.kind (send, recv, ...)
    int pid = 0, tid = 0, id = -1, op = -1;
    double ts = 0, dur = 0;
    long long bytes = 0;
};

struct ViewerReplay {
    int slices = 0, flows = 0;
    int perfetto_dropped = 0, devtools_dropped = 0;  // slices dropped
    int perfetto_bound = 0, devtools_bound = 0;      // flows that bind a send to a receive of its bytes
    std::vector<int> devtools_order;                 // the pids as DevTools shows them
    std::vector<std::string> problems;               // the first few, for messages
    void problem(const std::string& p) {
        if (problems.size() < 6) problems.push_back(p);
    }
};

inline std::vector<ViewerEvent> read_viewer_events(const JsonValue& doc) {
    std::vector<ViewerEvent> ev;
    for (const JsonValue& e : doc.find("traceEvents")->as_array()) {
        ViewerEvent v;
        v.ph = e.find("ph")->as_string()[0];
        if (v.ph != 'X' && v.ph != 's' && v.ph != 'f' && v.ph != 'I') continue;
        v.name = e.find("name")->as_string(), v.cat = e.has("cat") ? e.find("cat")->as_string() : "";
        v.pid = (int)e.find("pid")->as_integer(), v.tid = (int)e.find("tid")->as_integer();
        v.ts = e.find("ts")->as_number();
        if (v.ph == 'X') {
            const JsonValue& args = *e.find("args");
            v.dur = e.find("dur")->as_number(), v.op = (int)args.find("op")->as_integer();
            v.kind = (args.has("kind") ? args.find("kind") : e.find("cat"))->as_string();  // (older traces: the category)
            v.bytes = args.find("bytes")->as_integer();
        } else if (v.ph != 'I') {
            v.id = (int)e.find("id")->as_integer();
        }
        ev.push_back(v);
    }
    return ev;
}

inline ViewerReplay replay_viewers(const JsonValue& doc) {
    const std::vector<ViewerEvent> ev = read_viewer_events(doc);
    ViewerReplay r;
    std::map<int, std::pair<int, int>> perfetto_flow, devtools_flow;  // id -> (start slice, end slice), -1: none
    for (const ViewerEvent& e : ev) {
        r.slices += e.ph == 'X', r.flows += e.ph == 's';
        if (e.ph == 's') perfetto_flow[e.id] = devtools_flow[e.id] = {-1, -1};
    }
    auto where = [&](int i) {
        return "pid " + std::to_string(ev[i].pid) + " tid " + std::to_string(ev[i].tid) + " op " + std::to_string(ev[i].op) +
               " (" + ev[i].name + ") at " + std::to_string(ev[i].ts) + " us";
    };
    // Perfetto
    auto ns = [](double us) { return us == std::trunc(us) ? (long long)us * 1000 : std::llround(us * 1000.0); };
    std::vector<int> order(ev.size());
    for (size_t i = 0; i < ev.size(); i++) order[i] = (int)i;
    auto key = [&](int i) {
        return std::make_tuple(ns(ev[i].ts), ev[i].ph == 'X' ? LLONG_MAX - ns(ev[i].dur) : LLONG_MAX, i);
    };
    std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
    std::map<std::pair<int, int>, std::vector<int>> stack;
    for (int i : order) {
        const ViewerEvent& e = ev[i];
        std::vector<int>& st = stack[{e.pid, e.tid}];
        const long long t = ns(e.ts), d = ns(e.dur);
        if (e.ph == 'I') continue;  // (process-wide instants: a track of their own)
        if (e.ph == 's' || e.ph == 'f') {
            (e.ph == 's' ? perfetto_flow[e.id].first : perfetto_flow[e.id].second) = st.empty() ? -1 : st.back();
            continue;
        }
        while (!st.empty()) {
            const long long top_t = ns(ev[st.back()].ts), top_d = ns(ev[st.back()].dur), end = top_t + top_d;
            if (end < t || (end == t && !(top_d == 0 && d == 0))) st.pop_back();
            else break;
        }
        if (!st.empty() && t < ns(ev[st.back()].ts) + ns(ev[st.back()].dur) &&
            t + d > ns(ev[st.back()].ts) + ns(ev[st.back()].dur)) {
            r.perfetto_dropped++, r.problem("Perfetto drops " + where(i) + ": it overlaps " + where(st.back()));
            continue;
        }
        st.push_back(i);
    }
    // DevTools
    std::map<int, bool> open;                                                     // flow id -> started, not ended
    std::map<std::tuple<double, int, int, std::string>, std::vector<int>> binds;  // (ts, pid, tid, cat) -> flow ids
    for (const ViewerEvent& e : ev)
        if ((e.ph == 's' && !open[e.id]) || (e.ph == 'f' && open[e.id]))
            open[e.id] = e.ph == 's', binds[{e.ts, e.pid, e.tid, e.cat}].push_back(e.id);
    std::map<int, std::map<double, int>> devtools_ends;  // flow id -> its events by time
    std::map<std::pair<int, int>, int> entries;          // (pid, tid) -> events that count for the order
    std::vector<std::pair<int, int>> first_seen;         // tracks, by their first event in the file
    for (int i = 0; i < (int)ev.size(); i++) {
        const ViewerEvent& e = ev[i];
        if (e.ph != 'X' && e.ph != 'I') continue;
        if (entries[{e.pid, e.tid}]++ == 0) first_seen.push_back({e.pid, e.tid});
        auto b = binds.find({e.ts, e.pid, e.tid, e.cat});
        if (b == binds.end()) continue;
        for (int id : b->second) devtools_ends[id][e.ts] = i;
        binds.erase(b);  // (only the first event of a binding)
    }
    std::stable_sort(first_seen.begin(), first_seen.end(),
                     [&](const auto& a, const auto& b) { return entries[a] > entries[b]; });
    for (const auto& [pid, tid] : first_seen)
        if (std::find(r.devtools_order.begin(), r.devtools_order.end(), pid) == r.devtools_order.end())
            r.devtools_order.push_back(pid);
    for (auto& [id, ends] : devtools_ends)
        if (ends.size() == 2)  // (joined in file order)
            devtools_flow[id] = {std::min(ends.begin()->second, ends.rbegin()->second),
                                 std::max(ends.begin()->second, ends.rbegin()->second)};
    std::sort(order.begin(), order.end(), [&](int a, int b) {  // (a stable sort of the file's order)
        if (ev[a].ts != ev[b].ts) return ev[a].ts < ev[b].ts;
        if (ev[a].ts + ev[a].dur != ev[b].ts + ev[b].dur) return ev[a].ts + ev[a].dur > ev[b].ts + ev[b].dur;
        return a < b;
    });
    stack.clear();
    for (int i : order) {
        const ViewerEvent& e = ev[i];
        if (e.ph != 'X') continue;
        std::vector<int>& st = stack[{e.pid, e.tid}];
        while (!st.empty() && e.ts >= ev[st.back()].ts + ev[st.back()].dur) st.pop_back();
        if (!st.empty() && e.ts + e.dur > ev[st.back()].ts + ev[st.back()].dur) {
            r.devtools_dropped++, r.problem("DevTools drops " + where(i) + ": it overlaps " + where(st.back()));
            continue;
        }
        st.push_back(i);
    }
    auto bound = [&](const std::pair<int, int>& f) {
        return f.first >= 0 && f.second >= 0 && ev[f.first].kind == "send" && ev[f.second].kind == "recv" &&
               ev[f.first].bytes == ev[f.second].bytes;
    };
    for (const auto& [id, f] : perfetto_flow) {
        r.perfetto_bound += bound(f);
        if (!bound(f)) r.problem("Perfetto: arrow " + std::to_string(id) + " binds no send to its receive");
    }
    for (const auto& [id, f] : devtools_flow) {
        r.devtools_bound += bound(f);
        if (!bound(f)) r.problem("DevTools: arrow " + std::to_string(id) + " binds no send to its receive");
    }
    return r;
}

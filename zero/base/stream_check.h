// Checking mode of the CPU build (ZERO_CHECK=1; make test sets it): the GPU's
// stream order held on the CPU, and released memory poisoned (why:
// zero/README.md, "Streams and events").
//
// Agents are a rank's streams, its thread and its host-task workers, each with
// a vector clock joined along the edges a GPU has: the thread's issue order, a
// stream's wait or a thread's sync on an event (after its record), a host task
// after its event and its submitter's past, ordered before the thread only by
// wait() or drain(). Every kernel, copy, collective, send and piece of the
// engine's host work names the ranges it reads and writes; a write conflicts
// with any access, a read with a write, and a conflicting pair on two agents
// with no chain between them fails the run, naming both. Released memory
// (set_live(false)) is filled with 0xFF bytes, a NaN in fp32, bf16 and fp16.
// Only the accountant's buffers (and those named with track()) are watched,
// each by its own rank's checker: peers' buffers inside the emulated
// collectives are the collectives' business, tested apart.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "zero/base/common.h"

// One access of an operation: `bytes` at `p`, read, or written (a
// read-modify-write counts as a write: it conflicts with everything).
struct Access {
    const void* p = nullptr;
    size_t bytes = 0;
    bool write = false;
};
template <typename U>
Access reads(const U* p, size_t n) {
    return {p, p ? n * sizeof(U) : 0, false};
}
template <typename U>
Access writes(U* p, size_t n) {
    return {p, p ? n * sizeof(U) : 0, true};
}
inline Access reads_bytes(const void* p, size_t bytes) { return {p, p ? bytes : 0, false}; }
inline Access writes_bytes(void* p, size_t bytes) { return {p, p ? bytes : 0, true}; }

// ZERO_CHECK=1 in the environment (read once).
inline bool checking_mode() {
    static const bool on = [] {
        const char* v = getenv("ZERO_CHECK");
        return v && v[0] && strcmp(v, "0") != 0;
    }();
    return on;
}

class StreamChecker;
// The calling thread's rank checker (null outside checking mode) and the agent
// its host code runs as (the rank's thread, or a host-task worker in a task).
inline thread_local StreamChecker* tl_checker = nullptr;
inline thread_local int tl_agent = -1;

class StreamChecker {
  public:
    using Clock = std::vector<uint32_t>;  // per agent: how many of its operations are ordered before

    explicit StreamChecker(int rank_) : rank(rank_) { thread = add_agent("the rank's thread"); }
    StreamChecker(const StreamChecker&) = delete;
    StreamChecker& operator=(const StreamChecker&) = delete;

    const int rank;
    int thread = -1;  // the rank's own thread

    int add_agent(const std::string& name) {
        names.push_back(name);
        clocks.emplace_back();
        return (int)names.size() - 1;
    }
    // the agent the calling host code runs as
    int current() const { return tl_agent >= 0 ? tl_agent : thread; }

    // Memory to watch: the accountant's buffers, and any other a caller names.
    void track(const void* p, size_t bytes, const std::string& name) {
        if (p && bytes) regions[(uintptr_t)p] = Region{bytes, name, {}};
    }
    void untrack(const void* p) { regions.erase((uintptr_t)p); }

    // An operation the thread issues onto `stream` (a kernel, a copy, a
    // collective): it comes after everything the thread did before.
    template <typename Accesses>  // a list, or a vector where their number depends on the data
    void issue(int stream, const char* what, const Accesses& acc) {
        join(stream, clocks[current()]);
        tick(stream);
        check(stream, what, acc);
    }
    // Work of the thread itself (or of a host-task worker inside its task).
    template <typename Accesses>
    void host(const char* what, const Accesses& acc) {
        int a = current();
        tick(a);
        check(a, what, acc);
    }
    // Events: a record takes the stream's clock; a stream waits by joining it;
    // the thread synchronises by joining it.
    Clock record(int stream) {
        join(stream, clocks[current()]);
        tick(stream);
        return clocks[stream];
    }
    void wait(int stream, const Clock& e) {
        join(stream, clocks[current()]);
        join(stream, e);
    }
    void sync(const Clock& e) { join(current(), e); }
    void sync_stream(int stream) { join(current(), clocks[stream]); }
    // Host tasks: `worker` runs a task after `after` and after what its
    // submitter had done; whoever waits for the task joins `done`.
    Clock now() const { return clocks[current()]; }
    void start_task(int worker, const Clock& submitter, const Clock& after) {
        join(worker, submitter);
        join(worker, after);
    }
    Clock clock_of(int agent) const { return clocks[agent]; }
    void join_current(const Clock& c) { join(current(), c); }

    // The clocks themselves (what the calls above are made of; a recorded
    // list of operations is replayed with them, zero/base/ops.h).
    static uint32_t at(const Clock& c, int a) { return a < (int)c.size() ? c[a] : 0; }
    void join(int agent, const Clock& other) {
        Clock& c = clocks[agent];
        if (c.size() < other.size()) c.resize(other.size(), 0);
        for (size_t i = 0; i < other.size(); i++) c[i] = std::max(c[i], other[i]);
    }
    void tick(int agent) {
        Clock& c = clocks[agent];
        if ((int)c.size() <= agent) c.resize(agent + 1, 0);
        c[agent]++;
    }

    // An operation of `agent` with accesses `acc` (any range of Access): every
    // conflicting earlier access must be ordered before it.
    template <typename Accesses>
    void check(int agent, const char* what_, const Accesses& acc) {
        const char* what = seen_names.insert(what_).first->c_str();  // (a record outlives a caller's string)
        for (const Access& a : acc) {
            if (!a.p || !a.bytes || regions.empty()) continue;
            auto it = regions.upper_bound((uintptr_t)a.p);
            if (it == regions.begin()) continue;
            --it;
            Region& r = it->second;
            size_t lo = (uintptr_t)a.p - it->first;
            if (lo >= r.bytes) continue;  // not watched
            size_t hi = std::min(r.bytes, lo + a.bytes);
            const Clock& mine = clocks[agent];
            for (const Record& e : r.records) {
                if (e.hi <= lo || e.lo >= hi || e.agent == agent || !(a.write || e.write)) continue;
                if (at(mine, e.agent) >= e.clock) continue;  // an event orders it before
                fail("checking mode, rank %d: %s on %s %s %s bytes [%zu, %zu), which %s on %s %s, and no event "
                     "orders the two: on a GPU they would race (a missing event wait)",
                     rank, what, names[agent].c_str(), a.write ? "writes" : "reads", r.name.c_str(), lo, hi, e.what,
                     names[e.agent].c_str(), e.write ? "wrote" : "read");
            }
            // what this access makes redundant: a write (ordered after every
            // overlapping access, or we would have failed) every record it
            // covers; a read the same agent's covered reads
            auto& recs = r.records;
            recs.erase(std::remove_if(recs.begin(), recs.end(),
                                      [&](const Record& e) {
                                          return e.lo >= lo && e.hi <= hi && (a.write || (e.agent == agent && !e.write));
                                      }),
                       recs.end());
            recs.push_back({.lo = lo, .hi = hi, .agent = agent, .clock = at(mine, agent), .write = a.write, .what = what});
        }
    }

    // The poison of released memory: every byte 0xFF (NaN in every float type).
    static void poison(void* p, size_t bytes) {
        if (p) memset(p, 0xFF, bytes);
    }

  private:
    struct Record {
        size_t lo, hi;  // byte offsets in the region
        int agent;
        uint32_t clock;
        bool write;
        const char* what;
    };
    struct Region {
        size_t bytes = 0;
        std::string name;
        std::vector<Record> records;
    };
    std::map<uintptr_t, Region> regions;
    std::vector<std::string> names;
    std::set<std::string> seen_names;  // every op's name, kept for the records
    std::vector<Clock> clocks;

};

// The seams call this; outside checking mode it costs a test of a pointer.
inline void check_host(const char* what, std::initializer_list<Access> acc) {
    if (tl_checker) tl_checker->host(what, acc);
}
// Watch a buffer that does not come from the accountant (pinned token slots).
inline void check_track(const void* p, size_t bytes, const std::string& name) {
    if (tl_checker) tl_checker->track(p, bytes, name);
}
inline void check_untrack(const void* p) {
    if (tl_checker) tl_checker->untrack(p);
}

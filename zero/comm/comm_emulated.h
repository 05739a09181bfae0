// The emulated backend: N ranks as N threads of one process, on one device (the
// GPU, or the CPU build's RAM). Each rank owns its buffers. A collective is:
// publish my buffer pointer, barrier, read the peers' buffers (reduce or copy
// into my own), barrier. Sums run over ranks in rank order, so results are
// deterministic and the same on every rank.
//
// On the GPU the reads are kernels on each rank's stream, ordered by the peers'
// events (zero/README.md, "Streams and events"): hosts only meet at barriers; no
// stream is synchronised. A rank reads from its peers exactly the bytes Comm
// counts (zero/comm/comm.h).
//
// Point-to-point (pipeline stages) is a rendezvous, as in NCCL: a send posts
// its buffer, the receiver copies from it, and the send is complete once that
// copy is. Without a barrier: only the two ranks involved meet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/kernels.h"
#include "zero/comm/comm.h"

// A reusable barrier for a fixed number of threads (std::barrier is C++20),
// with a watchdog: a rank that waits longer than timeout_s (0: forever) ends
// the process with a line naming itself, what it waited in, and the ranks that
// never arrived -- a rank stuck in a loop or in another collective would
// otherwise hang the whole job without a word.
class ThreadBarrier {
  public:
    explicit ThreadBarrier(int n, double timeout_s = 0) : count(n), timeout(timeout_s), arrivals(n, 0) {}
    void wait(int rank = -1, const char* what = "a barrier") {
        std::unique_lock<std::mutex> lock(mu);
        uint64_t gen = generation;
        if (rank >= 0 && rank < count) arrivals[rank] = gen + 1;
        if (++arrived == count) {
            arrived = 0;
            generation++;
            cv.notify_all();
            return;
        }
        auto released = [&] { return gen != generation; };
        if (timeout <= 0) {
            cv.wait(lock, released);
            return;
        }
        if (cv.wait_for(lock, std::chrono::duration<double>(timeout), released)) return;
        std::string missing;
        for (int k = 0; k < count; k++)
            if (arrivals[k] != gen + 1) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
        fail("rank %d waited %.0f s in %s for rank(s) %s, which never arrived (stuck, or in another collective); "
             "--timeout sets the limit",
             rank, timeout, what, missing.empty() ? "(unknown)" : missing.c_str());
    }
    double timeout_s() const { return timeout; }

  private:
    std::mutex mu;
    std::condition_variable cv;
    const int count;
    const double timeout;
    int arrived = 0;
    uint64_t generation = 0;
    std::vector<uint64_t> arrivals;  // per rank: 1 + the generation it last arrived in
};

// What the ranks of one emulated world share: the barrier and the mailboxes in
// which each rank publishes its buffer pointers, scalars and events; and the
// worlds of the groups split from it, which live as long as it does.
struct EmulatedWorld {
    explicit EmulatedWorld(int n, double timeout_s = 0)
        : world(n), barrier(n, timeout_s), send(n), scalar(n), ready(n), done(n), split_color(n), split_key(n) {}
    const int world;
    ThreadBarrier barrier;
    std::vector<const void*> send;
    std::vector<double> scalar;
    std::vector<Event> ready, done;  // per rank, recorded on its stream (GPU only)
    std::vector<int> split_color, split_key;
    std::mutex children_mu;
    std::map<std::pair<int, int>, std::unique_ptr<EmulatedWorld>> children;  // (split call, color) -> group
    // point-to-point: per (sender, receiver) the sends posted and not yet received, oldest first
    struct Message {
        const void* data;
        size_t bytes;
        Event ready, done;  // the data is complete (sender's stream); it has been copied (receiver's)
        bool taken = false;
    };
    std::mutex p2p_mu;
    std::condition_variable p2p_cv;
    std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> channels;
};

class EmulatedComm : public Comm {
  public:
    EmulatedComm(EmulatedWorld& w, int rank_, const KernelCtx& ctx_) : Comm(rank_, w.world), shared(w), ctx(ctx_) {
        shared.ready[rank] = event_create();
        shared.done[rank] = event_create();
    }
    ~EmulatedComm() override {
        event_destroy(shared.ready[rank]);
        event_destroy(shared.done[rank]);
    }

  protected:
    void run_all_reduce_sum(void* buf, size_t count, DType dt, Stream s) override {
        // reduce-scatter then all-gather, in place, as a ring does: rank r sums
        // chunk r of every peer into its own chunk r, then copies peers' chunks.
        size_t esz = dtype_size(dt);
        size_t lo = chunk_begin(count, rank), hi = chunk_begin(count, rank + 1);
        enter(buf, s, "all_reduce");
        reduce(dt, (char*)buf + lo * esz, lo * esz, hi - lo, s);
        meet(shared.ready, s, "all_reduce");  // everyone's reduced chunk is ready
        for (int k = 0; k < world; k++) {
            if (k == rank) continue;
            size_t klo = chunk_begin(count, k), khi = chunk_begin(count, k + 1);
            device_copy((char*)buf + klo * esz, (const char*)shared.send[k] + klo * esz, (khi - klo) * esz, s);
        }
        leave(s);  // (read: phase 1 my chunk from N-1 peers, phase 2 every other chunk once, as counted)
    }

    void run_reduce_scatter_sum(const void* send, void* recv, size_t recvcount, DType dt, Stream s) override {
        size_t esz = dtype_size(dt);
        enter(send, s, "reduce_scatter");
        reduce(dt, recv, rank * recvcount * esz, recvcount, s);
        leave(s);
    }

    void run_all_gather(const void* send, void* recv, size_t sendcount, DType dt, Stream s) override {
        size_t bytes = sendcount * dtype_size(dt);
        enter(send, s, "all_gather");
        for (int k = 0; k < world; k++) {
            if (k == rank && send == (const char*)recv + k * bytes) continue;  // in place: mine is there
            device_copy((char*)recv + k * bytes, shared.send[k], bytes, s);
        }
        leave(s);
    }

    void run_broadcast(void* buf, size_t bytes, int root, Stream s) override {
        enter(buf, s, "broadcast");
        if (rank != root) device_copy(buf, shared.send[root], bytes, s);
        leave(s);
    }
    void run_send(const void* buf, size_t bytes, int peer, Stream s) override { post({true, (void*)buf, bytes, peer, s}); }
    void run_recv(void* buf, size_t bytes, int peer, Stream s) override { post({false, buf, bytes, peer, s}); }
    std::vector<double> run_gather_scalar(double x) override {
        shared.scalar[rank] = x;
        shared.barrier.wait(rank, "a scalar reduction");
        std::vector<double> all = shared.scalar;
        shared.barrier.wait(rank, "a scalar reduction");  // nobody overwrites its mailbox before all have read
        return all;
    }

    void run_group_start() override { grouped = true; }
#ifndef ZERO_CUDA
    // The CPU build's each send and receive as it ran: a send from its post until its peer had copied it, a
    // receive from when its message was there until it had copied it (not before the send: its arrow holds)
    void stamp_p2p(OpStamps& stamps, size_t k, int op, Stream) override {
        stamps.span(op, spans[k].first, spans[k].second);
    }
#endif
    void run_group_end() override {
        NotRecorded backend_own;  // (the step's sends and receives were recorded as posted)
        grouped = false;
        run_point_to_point();
    }

  public:
    void barrier() override { shared.barrier.wait(rank, "barrier"); }

    std::unique_ptr<Comm> split(int color, int key) override {
        shared.split_color[rank] = color;
        shared.split_key[rank] = key;
        shared.barrier.wait();
        std::vector<int> members;  // my group, in the order of its new ranks
        for (int k = 0; k < world; k++)
            if (shared.split_color[k] == color) members.push_back(k);
        std::stable_sort(members.begin(), members.end(),
                         [&](int a, int b) { return shared.split_key[a] < shared.split_key[b]; });
        int new_rank = (int)(std::find(members.begin(), members.end(), rank) - members.begin());
        const std::pair<int, int> id{splits++, color};
        if (new_rank == 0) {
            std::lock_guard<std::mutex> lock(shared.children_mu);
            shared.children[id] = std::make_unique<EmulatedWorld>((int)members.size(), shared.barrier.timeout_s());
        }
        shared.barrier.wait();  // every group's world exists; the mailboxes may be reused
        std::lock_guard<std::mutex> lock(shared.children_mu);
        return std::make_unique<EmulatedComm>(*shared.children.at(id), new_rank, ctx);
    }

  private:
    EmulatedWorld& shared;
    KernelCtx ctx;
    int splits = 0;  // split() calls so far (every rank makes the same ones)
    struct P2POp {
        bool send;
        void* buf;
        size_t bytes;
        int peer;
        Stream s;
    };
    std::vector<P2POp> pending;  // the open group's operations
    std::vector<std::pair<double, double>> spans;  // when each ran (OpClock's seconds), for a traced step
    bool grouped = false;

    void post(const P2POp& op) {
        CHECK(op.peer >= 0 && op.peer < world && op.peer != rank, "internal: point-to-point from rank %d to rank %d of %d",
              rank, op.peer, world);
        pending.push_back(op);
        if (!grouped) run_point_to_point();
    }

    // Waits on the channel condition until `done` holds, or ends the job naming
    // the peer once the watchdog's time has passed.
    template <typename Pred>
    void p2p_wait(std::unique_lock<std::mutex>& lock, Pred done, const char* what, size_t bytes, int peer) {
        double timeout = shared.barrier.timeout_s();
        if (timeout <= 0) return shared.p2p_cv.wait(lock, done);
        if (shared.p2p_cv.wait_for(lock, std::chrono::duration<double>(timeout), done)) return;
        fail("rank %d waited %.0f s to %s %zu bytes %s rank %d of its group, which never did its part (stuck, or in "
             "another operation); --timeout sets the limit",
             rank, timeout, what, bytes, what[0] == 's' ? "to" : "from", peer);
    }

    // The open group: post every send, then complete every receive (each from
    // the oldest send its peer posted to this rank: the two sides pair in
    // order), then wait until the peers have copied the sends. No rank waits
    // before it has posted all its sends, so two ranks sending to each other
    // in one group never wait on each other.
    void run_point_to_point() {
        std::vector<std::pair<std::shared_ptr<EmulatedWorld::Message>, const P2POp*>> posted;
        spans.assign(pending.size(), {NAN, NAN});
        for (const P2POp& op : pending) {
            if (!op.send) continue;
            spans[&op - pending.data()].first = OpClock::now();
            auto msg = std::make_shared<EmulatedWorld::Message>();
            msg->data = op.buf, msg->bytes = op.bytes, msg->ready = event_create(), msg->done = event_create();
            event_record(msg->ready, op.s);
            {
                std::lock_guard<std::mutex> lock(shared.p2p_mu);
                shared.channels[{rank, op.peer}].push_back(msg);
            }
            shared.p2p_cv.notify_all();
            posted.push_back({msg, &op});
        }
        for (const P2POp& op : pending) {
            if (op.send) continue;
            std::shared_ptr<EmulatedWorld::Message> msg;
            {
                std::unique_lock<std::mutex> lock(shared.p2p_mu);
                auto& channel = shared.channels[{op.peer, rank}];
                p2p_wait(lock, [&] { return !channel.empty(); }, "receive", op.bytes, op.peer);
                msg = channel.front();
                channel.pop_front();
            }
            std::pair<double, double>& span = spans[&op - pending.data()];
            span.first = OpClock::now();
            CHECK(msg->bytes == op.bytes, "internal: rank %d receives %zu bytes from rank %d, which sent %zu", rank,
                  op.bytes, op.peer, msg->bytes);
            stream_wait(op.s, msg->ready);
            device_copy(op.buf, msg->data, op.bytes, op.s);
            event_record(msg->done, op.s);
            {
                std::lock_guard<std::mutex> lock(shared.p2p_mu);
                msg->taken = true;
            }
            shared.p2p_cv.notify_all();
            span.second = OpClock::now();
        }
        for (auto& sent : posted) {
            const std::shared_ptr<EmulatedWorld::Message>& msg = sent.first;
            const P2POp* op = sent.second;
            {
                std::unique_lock<std::mutex> lock(shared.p2p_mu);
                p2p_wait(lock, [&] { return msg->taken; }, "send", op->bytes, op->peer);
            }
            spans[op - pending.data()].second = OpClock::now();
            stream_wait(op->s, msg->done);  // not before the peer's copy: the caller may reuse the buffer
            event_destroy(msg->ready);
            event_destroy(msg->done);
        }
        pending.clear();
    }

    size_t chunk_begin(size_t count, int k) const { return count * k / world; }

    // Record my event of `events` on my stream, meet the peers, and make my
    // stream wait on theirs.
    void meet(std::vector<Event>& events, Stream s, const char* what) {
        event_record(events[rank], s);
        shared.barrier.wait(rank, what);
        for (int k = 0; k < world; k++)
            if (k != rank) stream_wait(s, events[k]);
    }
    // Publish my buffer and make my stream wait until every peer's data is ready.
    void enter(const void* send, Stream s, const char* what) {
        shared.send[rank] = send;
        meet(shared.ready, s, what);
    }
    // Do not return (and later overwrite my buffers) until every peer has read them.
    void leave(Stream s) { meet(shared.done, s, "a collective's exit"); }

    // dst = the sum over ranks of the n elements at byte `offset` of each rank's published buffer
    void reduce(DType dt, void* dst, size_t offset, size_t n, Stream s) {
        std::vector<const void*> srcs(world);
        for (int k = 0; k < world; k++) srcs[k] = (const char*)shared.send[k] + offset;
        KernelCtx c = ctx;
        c.stream = s;
        switch (dt) {
            case DType::F32: reduce_sum(c, (float*)dst, (const float* const*)srcs.data(), world, n); break;
            case DType::BF16: reduce_sum(c, (bf16*)dst, (const bf16* const*)srcs.data(), world, n); break;
            case DType::F16: reduce_sum(c, (f16*)dst, (const f16* const*)srcs.data(), world, n); break;
        }
    }
};

// Runs fn(comm) on `world` threads, one emulated rank each, and waits for all.
// Each rank gets its own kernel context (stream); ranks must not share buffers
// except through the collectives. timeout_s > 0: the barriers' watchdog.
inline void run_emulated_ranks(int world, const std::function<void(int rank, EmulatedWorld&)>& fn,
                               double timeout_s = 0) {
    EmulatedWorld shared(world, timeout_s);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; r++) threads.emplace_back([&, r] { fn(r, shared); });
    for (auto& t : threads) t.join();
}

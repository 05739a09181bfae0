// Host work that must wait for the device: "when this event has completed, run
// this function". Optimizer offload uses it to accumulate each unit's gradient
// slice on the host as soon as the slice has arrived, while the rank's own
// thread goes on enqueueing the rest of backward.
//
// In the CUDA build one worker thread per rank runs the tasks in order, each
// after cudaEventSynchronize on its event. In the CPU build every copy has
// already happened when the task is submitted, so the task runs at once, on the
// caller's thread, in the same order. A HostTasks made with run_late holds its
// tasks instead and runs them at wait() or drain(), on the waiting thread: as
// late as a worker could run them, so that the CPU build's tests see what a
// slow worker would (the delayed parameter update's AdamW, zero_engine.h).
// In checking mode (zero/base/stream_check.h) a task runs as the worker's
// agent, ordered after its event and after what the submitter had done; only
// wait() and drain() order the waiting thread after it, as on the GPU. In a
// dry run (zero/base/ops.h) every task runs at once, in either build, its
// work recorded on the worker's lane (the delayed update's on its own) after
// its event, and a wait is the thread's wait for its last op.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <cstdint>

#include "zero/base/backend.h"

class HostTasks {
  public:
    explicit HostTasks(bool run_late_ = false) : run_late(run_late_), dry(dry_recorder() != nullptr) {
#ifndef ZERO_CUDA
        if (tl_checker) worker = tl_checker->add_agent(run_late ? "the delayed-update thread" : "the host-task worker");
#else
        if (dry) return;
        // The worker drives the same GPU as the rank that made it (a new thread
        // starts on device 0, whatever the rank's local rank).
        int device = 0;
        cudaCheck(cudaGetDevice(&device));
        worker = std::thread([this, device] {
            cudaCheck(cudaSetDevice(device));
            run();
        });
#endif
    }
    ~HostTasks() {
#ifdef ZERO_CUDA
        if (dry) return;
        {
            std::lock_guard<std::mutex> lock(mu);
            stopping = true;
        }
        cv.notify_all();
        worker.join();
#endif
    }
    HostTasks(const HostTasks&) = delete;
    HostTasks& operator=(const HostTasks&) = delete;

    // Runs fn once `after` has completed on the device. Returns the task's
    // number, for wait().
    uint64_t submit(Event after, std::function<void()> fn) {
#ifdef ZERO_CUDA
        if (tl_recorder && tl_recorder->capture) {  // a capture (calibration): at once, on this thread
            if (after) event_sync(after);
            fn();
            std::lock_guard<std::mutex> lock(mu);
            completed++;
            return submitted++;
        }
        if (OpRecorder* r = dry_recorder()) {  // a dry run: its ops now, on the worker's lane, after its event
            r->task_after = after ? dry_event(after)->op : -1;
            const Lane outer = r->host_lane;
            r->host_lane = run_late ? Lane::Update : Lane::Worker;
            fn();
            r->host_lane = outer, r->task_after = -1;
            dry_last[submitted] = r->last_on(run_late ? Lane::Update : Lane::Worker);
            return submitted++;
        }
        uint64_t id;
        {
            std::lock_guard<std::mutex> lock(mu);
            id = submitted++;
            queue.push_back({after, std::move(fn)});
        }
        cv.notify_all();
        return id;
#else
        Task t{std::move(fn), {}, {}};
        if (worker >= 0 && tl_checker) {
            t.submitter = tl_checker->now();
            if (checked(after)) t.after = after->clock;
        }
        if (dry_recorder()) t.after_op = after ? after->op : -1;
        late.push_back(std::move(t));
        uint64_t id = submitted++;
        if (!run_late || dry_recorder()) run_until(id);
        return id;
#endif
    }

    // Returns once task `id` (and every task before it) has run.
    void wait(uint64_t id) {
#ifdef ZERO_CUDA
        if (dry) return dry_wait(id);
        std::unique_lock<std::mutex> lock(mu);
        done_cv.wait(lock, [&] { return completed > id; });
#else
        run_until(id);
        if (worker >= 0 && tl_checker) {  // after task id, not after the later ones that ran already
            auto it = done_clocks.find(id);   // (gone: an earlier wait covered it)
            if (it != done_clocks.end()) tl_checker->join_current(it->second);
            done_clocks.erase(done_clocks.begin(), done_clocks.upper_bound(id));
        }
        if (dry_recorder()) dry_wait(id);
#endif
    }

    // Returns once every submitted task has run.
    void drain() {
        if (submitted > 0) wait(submitted - 1);
    }

  private:
    // A dry run: the thread waits for the last op of the last task up to id that recorded one.
    void dry_wait(uint64_t id) {
        auto it = dry_last.upper_bound(id);
        while (it != dry_last.begin() && (--it)->second < 0) {}
        if (it != dry_last.end() && it->first <= id) dry_recorder()->host_wait(it->second);
        dry_last.erase(dry_last.begin(), dry_last.upper_bound(id));
    }
#ifdef ZERO_CUDA
    struct Task {
        Event after;
        std::function<void()> fn;
    };
    void run() {
        for (;;) {
            Task t;
            {
                std::unique_lock<std::mutex> lock(mu);
                cv.wait(lock, [&] { return stopping || !queue.empty(); });
                if (queue.empty()) return;
                t = std::move(queue.front());
                queue.pop_front();
            }
            cudaCheck(cudaEventSynchronize(t.after));
            t.fn();
            {
                std::lock_guard<std::mutex> lock(mu);
                completed++;
            }
            done_cv.notify_all();
        }
    }
    std::mutex mu;
    std::condition_variable cv, done_cv;
    std::deque<Task> queue;
    bool stopping = false;
    std::thread worker;
#else
    struct Task {
        std::function<void()> fn;
        StreamChecker::Clock submitter, after;  // checking mode: what the task starts after
        int after_op = -1;                      // a dry run: the op its event follows
    };
    std::deque<Task> late;  // submitted, not yet run
    int worker = -1;        // checking mode: the worker's agent
    std::map<uint64_t, StreamChecker::Clock> done_clocks;  // checking mode: the worker's clock after each task
    // Runs every task up to `id` (on the calling thread, as the worker).
    void run_until(uint64_t id) {
        while (completed <= id) {
            Task t = std::move(late.front());
            late.pop_front();
            const bool check = worker >= 0 && tl_checker;
            const int outer = tl_agent;
            if (check) {
                tl_checker->start_task(worker, t.submitter, t.after);
                tl_agent = worker;
            }
            OpRecorder* r = dry_recorder();
            const Lane lane = run_late ? Lane::Update : Lane::Worker, outer_lane = r ? r->host_lane : Lane::Host;
            if (r) r->host_lane = lane, r->task_after = t.after_op;
            t.fn();
            if (r) r->host_lane = outer_lane, r->task_after = -1, dry_last[completed] = r->last_on(lane);
            if (check) {
                tl_agent = outer;
                done_clocks[completed] = tl_checker->clock_of(worker);
            }
            completed++;
        }
    }
#endif
    const bool run_late;  // the CPU build: run tasks at wait(), not at submit()
    const bool dry;       // made during a dry run: no worker thread
    std::map<uint64_t, int> dry_last;  // a dry run: each task's last op on its lane
    uint64_t submitted = 0, completed = 0;
};

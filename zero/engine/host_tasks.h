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
// wait() and drain() order the waiting thread after it, as on the GPU. While
// the thread records (a dry run or a capture, zero/base/ops.h) every task
// runs at once, in either build, on the submitting thread (a capture's after
// its event has completed), its work recorded on the worker's lane (the
// delayed update's on its own) after its event, and a wait is the thread's
// wait for its last op.
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
    explicit HostTasks(bool run_late_ = false)
        : run_late(run_late_), lane(run_late_ ? Lane::Update : Lane::Worker), dry(dry_recorder() != nullptr) {
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
        if (OpRecorder* r = tl_recorder) {  // recording: at once, on this thread, its ops on the worker's lane
            if (after && r->capture) {
                NotRecorded the_workers_own;
                event_sync(after);
            }
            recorded(r, after ? r->event_op(after) : -1, fn, submitted);
            std::lock_guard<std::mutex> lock(mu);
            completed++;
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
        if (OpRecorder* r = tl_recorder) t.after_op = after ? r->event_op(after) : -1;
        late.push_back(std::move(t));
        uint64_t id = submitted++;
        if (!run_late || tl_recorder) run_until(id);
        return id;
#endif
    }

    // Returns once task `id` (and every task before it) has run.
    void wait(uint64_t id) {
#ifdef ZERO_CUDA
        if (tl_recorder) return recorded_wait(id);
        std::unique_lock<std::mutex> lock(mu);
        done_cv.wait(lock, [&] { return completed > id; });
#else
        run_until(id);
        if (worker >= 0 && tl_checker) {  // after task id, not after the later ones that ran already
            auto it = done_clocks.find(id);   // (gone: an earlier wait covered it)
            if (it != done_clocks.end()) tl_checker->join_current(it->second);
            done_clocks.erase(done_clocks.begin(), done_clocks.upper_bound(id));
        }
        if (tl_recorder) recorded_wait(id);
#endif
    }

    // Returns once every submitted task has run.
    void drain() {
        if (submitted > 0) wait(submitted - 1);
    }

  private:
    // Recording: task `id`'s ops (fn's) on the task's lane, the first after op `after_op`.
    void recorded(OpRecorder* r, int after_op, const std::function<void()>& fn, uint64_t id) {
        const Lane outer = r->host_lane;
        const int unit = r->unit;  // (a task labels its own ops: at_unit)
        r->host_lane = lane, r->task_after = after_op;
        fn();
        r->host_lane = outer, r->task_after = -1, r->unit = unit;
        recorded_last[id] = r->last_on(lane);
    }
    // Recording: the thread waits for the last op of the last task up to id that recorded one.
    void recorded_wait(uint64_t id) {
        auto it = recorded_last.upper_bound(id);
        while (it != recorded_last.begin() && (--it)->second < 0) {}
        if (it != recorded_last.end() && it->first <= id) tl_recorder->host_wait(it->second);
        recorded_last.erase(recorded_last.begin(), recorded_last.upper_bound(id));
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
        int after_op = -1;                      // recording: the op its event follows
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
            if (OpRecorder* r = tl_recorder) recorded(r, t.after_op, t.fn, completed);
            else t.fn();
            if (check) {
                tl_agent = outer;
                done_clocks[completed] = tl_checker->clock_of(worker);
            }
            completed++;
        }
    }
#endif
    const bool run_late;  // the CPU build: run tasks at wait(), not at submit()
    const Lane lane;      // where a recording puts its tasks' ops
    const bool dry;       // made during a dry run: no worker thread
    std::map<uint64_t, int> recorded_last;  // recording: each task's last op on its lane
    uint64_t submitted = 0, completed = 0;
};

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
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <cstdint>

#include "zero/base/backend.h"

class HostTasks {
  public:
    explicit HostTasks(bool run_late_ = false) : run_late(run_late_) {
#ifdef ZERO_CUDA
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
        uint64_t id;
        {
            std::lock_guard<std::mutex> lock(mu);
            id = submitted++;
            queue.push_back({after, std::move(fn)});
        }
        cv.notify_all();
        return id;
#else
        (void)after;
        late.push_back(std::move(fn));
        uint64_t id = submitted++;
        if (!run_late) wait(id);
        return id;
#endif
    }

    // Returns once task `id` (and every task before it) has run.
    void wait(uint64_t id) {
#ifdef ZERO_CUDA
        std::unique_lock<std::mutex> lock(mu);
        done_cv.wait(lock, [&] { return completed > id; });
#else
        while (completed <= id) {
            std::function<void()> fn = std::move(late.front());
            late.pop_front();
            fn();
            completed++;
        }
#endif
    }

    // Returns once every submitted task has run.
    void drain() {
        if (submitted > 0) wait(submitted - 1);
    }

  private:
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
    std::deque<std::function<void()>> late;  // submitted, not yet run
#endif
    const bool run_late;  // the CPU build: run tasks at wait(), not at submit()
    uint64_t submitted = 0, completed = 0;
};

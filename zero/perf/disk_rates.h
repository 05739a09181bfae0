// The disk's plain rates, apart from the engine that drives it
// (zero/engine/disk_states.h): a file of `bytes` at `path` written sequentially
// in `block`-byte O_DIRECT requests, `in_flight` of them at a time (a thread
// each, taking the next block in file order), then fdatasync, and read back
// the same way; GB/s each (direct: O_DIRECT was taken; if not, the page cache
// is dropped before the read). The file is removed. One request at a time is
// the plain reference the engine is held to (dev/bench_nvme.cpp); the
// engine's own request size and concurrency (threads x queue_depth) is what
// --calibrate gives the step-time model for NVMe offload, since that is how
// the engine drives the disk.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "zero/base/common.h"
#include "zero/engine/disk_states.h"

inline void plain_disk_rates(const std::string& path, size_t bytes, size_t block, int in_flight, bool& direct,
                             double& write_gbps, double& read_gbps) {
    CHECK(block >= DiskStates::ALIGN && block % DiskStates::ALIGN == 0 && in_flight >= 1,
          "internal: plain_disk_rates needs whole 4 KiB blocks and at least one request in flight");
    bytes = round_up(bytes, block);
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    direct = fd >= 0;
    if (fd < 0) fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "cannot open %s: %s", path.c_str(), strerror(errno));
    const int err = posix_fallocate(fd, 0, (off_t)bytes);  // as the engine's file is
    CHECK(err == 0, "cannot allocate %zu bytes for %s: %s", bytes, path.c_str(), strerror(err));
    std::atomic<int> failed{0};  // the first error's errno (a short transfer: EIO)
    auto note_error = [&](int e) {
        int none = 0;
        failed.compare_exchange_strong(none, e ? e : EIO);
    };
    auto pass = [&](bool write) {  // every block once, in_flight requests at a time; seconds
        std::atomic<size_t> next{0};
        auto worker = [&] {
            void* p = nullptr;
            if (posix_memalign(&p, DiskStates::ALIGN, block) != 0) return note_error(ENOMEM);
            for (size_t i = 0; i < block; i++) ((char*)p)[i] = (char)(i * 131 + 7);
            for (size_t at; !failed && (at = next.fetch_add(block)) < bytes;)
                if ((write ? pwrite(fd, p, block, (off_t)at) : pread(fd, p, block, (off_t)at)) != (ssize_t)block)
                    note_error(errno);
            free(p);
        };
        HostClock clock;
        std::vector<std::thread> pool;
        for (int i = 1; i < in_flight; i++) pool.emplace_back(worker);
        worker();
        for (std::thread& t : pool) t.join();
        if (write && !failed && fdatasync(fd) != 0) note_error(errno);
        return clock.seconds();
    };
    write_gbps = bytes / pass(true) / 1e9;
    if (!direct) posix_fadvise(fd, 0, (off_t)bytes, POSIX_FADV_DONTNEED);
    if (!failed) read_gbps = bytes / pass(false) / 1e9;
    close(fd);
    unlink(path.c_str());
    CHECK(!failed, "cannot write and read back %s: %s", path.c_str(), strerror(failed));
}

// NVMe offload of the optimizer states (ZeRO-Infinity): a rank's fp32 master
// weights and Adam moments for a range of its shard live in one file per rank,
// <dir>/zero_states_rank<r>.bin, and the CPU AdamW updates them tile by tile in
// a small ring of aligned host buffers. begin(t) hands out tile t once its read
// has landed and queues the reads of the tiles after it; end(t) queues its
// write. So the disk reads ahead and writes behind while the CPU computes.
//
// The file is tile-major: tile t's [master | m | v], each state rounded up to
// 4096 bytes, so that a tile is one sequential region and every request is
// aligned for O_DIRECT. O_DIRECT keeps the page cache out: each state is read
// once and written once per step, and caching them would only evict memory the
// run needs. Tile t lives in ring buffer t % buffers; its read starts only once
// that buffer's previous tile has been written. The I/O is threads x
// queue_depth workers, each doing synchronous pread/pwrite of up to
// block_bytes, so that many requests are in flight without libaio or io_uring.
//
// While the thread records (zero/base/ops.h) each tile's read and write is an
// op on the disk lane, recorded where the rank's thread asks for it (the read
// after the write its buffer waits for, the write after the AdamW that filled
// the buffer), begin() a host wait for the read, drain() one for the last op.
// A dry run opens nothing and starts no thread: its disk is one whose every
// read and write is done the moment it is queued (enqueue), through the same
// states as a real one's. A capture moves the bytes (the disk is not among
// what --calibrate replays: it measures the disk apart, zero/perf/disk_rates.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "zero/base/common.h"
#include "zero/base/memory.h"
#include "zero/layout/shard_plan.h"

// --nvme_path, --nvme_buffers, --nvme_block_kib, --nvme_queue_depth, --nvme_threads
struct DiskConfig {
    std::string dir;
    int buffers = 4;               // the ring: tiles in flight (DeepSpeed's buffer_count)
    size_t block_bytes = 1 << 20;  // one pread/pwrite request
    int queue_depth = 8;           // requests in flight per I/O thread
    int threads = 1;               // I/O threads (DeepSpeed's intra_op_parallelism)
    // requests in flight at once: one worker thread each, at most 64
    int workers() const { return std::min(64, threads * queue_depth); }
};
// Rank r's file under dir (the fit check counts what an earlier run left there as free).
inline std::string disk_states_file(const std::string& dir, int rank) {
    return dir + "/zero_states_rank" + std::to_string(rank) + ".bin";
}

class DiskStates {
  public:
    static constexpr size_t ALIGN = 4096;  // offsets, lengths and addresses (O_DIRECT wants the sector size)

    // tiles: sorted, not overlapping, none empty.
    DiskStates(const DiskConfig& cfg_, int rank_, std::vector<DiskTile> tiles_, MemoryAccountant& mem)
        : cfg(cfg_), rank(rank_), tiles(std::move(tiles_)),
          file(disk_states_file(cfg_.dir, rank_)), dry(dry_recorder() != nullptr),
          stamps(tl_recorder && tl_recorder->capture ? tl_recorder->stamps : nullptr) {
        CHECK(cfg.buffers >= 1, "--nvme_buffers must be at least 1 (it is %d)", cfg.buffers);
        CHECK(cfg.block_bytes >= ALIGN && cfg.block_bytes % ALIGN == 0,
              "--nvme_block_kib must be a positive multiple of 4 (it is %g)", cfg.block_bytes / 1024.0);
        CHECK(cfg.queue_depth >= 1 && cfg.threads >= 1, "--nvme_queue_depth and --nvme_threads must be at least 1");
        size_t largest = 0, pos = 0;
        for (size_t t = 0; t < tiles.size(); t++) {
            CHECK(tiles[t].n > 0 && (t == 0 || tiles[t].offset >= tiles[t - 1].offset + tiles[t - 1].n),
                  "internal: disk tile %zu is empty or overlaps the tile before it", t);
            tile_pos.push_back(pos);
            pos += 3 * state_bytes(tiles[t].n);
            largest = std::max(largest, tiles[t].n);
        }
        slot_bytes = 3 * state_bytes(largest);
        mem.reserve_disk(file_bytes(tiles), MemKind::Optimizer, "optimizer_states_disk");
        // (host arena allocations are only 256-byte aligned: each buffer has 4096 bytes to align up in)
        char* ring = (char*)mem.allocate(ring_bytes(cfg.buffers, largest), MemKind::Optimizer, Arena::Host,
                                         "disk_ring", true);
        slots.resize(cfg.buffers);
        for (int k = 0; k < cfg.buffers; k++)
            slots[k].buf = (char*)round_up((uintptr_t)(ring + k * (slot_bytes + ALIGN)), ALIGN);
        pending.assign(cfg.buffers + 1, 0), job_op.assign(cfg.buffers + 1, -1), job_start.assign(cfg.buffers + 1, 0);
        if (dry) return;
        open_file();
        for (int i = 0; i < cfg.workers(); i++) pool.emplace_back([this] { work(); });
    }
    // Drains, stops the workers, then removes the file and closes it (which
    // drops the lock): the states are scratch, what outlives the run is in its
    // checkpoints. A run that died leaves its file; the next one truncates it.
    ~DiskStates() {
        if (dry) return;
        drain();
        {
            std::lock_guard<std::mutex> lock(mu);
            stopping = true;
        }
        work_cv.notify_all();
        for (std::thread& w : pool) w.join();
        unlink(file.c_str());
        close(fd);
    }
    DiskStates(const DiskStates&) = delete;
    DiskStates& operator=(const DiskStates&) = delete;

    // One state of an n-element tile, aligned.
    static size_t state_bytes(size_t n) { return round_up(4 * n, ALIGN); }
    static size_t file_bytes(const std::vector<DiskTile>& tiles) {
        size_t bytes = 0;
        for (const DiskTile& d : tiles) bytes += 3 * state_bytes(d.n);
        return bytes;
    }
    // The ring's host bytes, with each buffer's alignment slack.
    static size_t ring_bytes(int buffers, size_t largest_tile_n) {
        return (size_t)buffers * (3 * state_bytes(largest_tile_n) + ALIGN);
    }

    struct View {  // tile t's n elements of each state, in a ring buffer
        float *master, *m, *v;
    };

    // Queues the read of tile t (behind its buffer's write, if one is in
    // flight) and returns at once. A no-op if it is queued or held already, or
    // if its buffer holds another tile: read ahead, or between begin and end.
    void prefetch(int t) {
        check_tile(t);
        std::unique_lock<std::mutex> lock(mu);
        want(t, false, lock);
    }
    // Tile t's states in host memory: its read queued if it is not, and those
    // of the next buffers - 1 tiles behind it (each after its buffer's write,
    // never waiting for one here); then waits for tile t's.
    View begin(int t) {
        check_tile(t);
        std::unique_lock<std::mutex> lock(mu);
        Slot& s = slot_of(t);
        CHECK(s.use != Use::Held, "internal: begin(%d) while tile %d holds its buffer", t, s.tile);
        want(t, true, lock);
        for (int k = 1; k < cfg.buffers && t + k < num_tiles(); k++) want(t + k, false, lock);
        auto landed = [&] { done_cv.wait(lock, [&] { return s.tile == t && s.use == Use::Ready; }); };
        if (OpRecorder* r = tl_recorder) r->host_wait(s.read_op, landed);
        else landed();
        s.use = Use::Held;
        const size_t sb = state_bytes(tiles[t].n);
        return {(float*)s.buf, (float*)(s.buf + sb), (float*)(s.buf + 2 * sb)};
    }
    // Tile t updated: its write is queued from its buffer, which takes the
    // next tile's read once the write is done.
    void end(int t) {
        check_tile(t);
        std::lock_guard<std::mutex> lock(mu);
        Slot& s = slot_of(t);
        CHECK(s.use == Use::Held && s.tile == t, "internal: end(%d) without begin(%d)", t, t);
        s.use = Use::Writing, s.queued = -1;
        const size_t bytes = 3 * state_bytes(tiles[t].n);
        if (OpRecorder* r = tl_recorder) {
            StepOp op = disk_op(OpKind::DiskWrite, bytes);
            op.acc = {reads_bytes(s.buf, bytes)};
            if (r->last_on(r->host_lane) >= 0) op.after = {r->last_on(r->host_lane)};  // the AdamW that wrote it
            s.write_op = r->add(op);
        }
        enqueue(t % cfg.buffers, s.buf, tile_pos[t], bytes, Io::Write, s.write_op);
    }
    // Every queued read and write finished (before a checkpoint, at the end).
    // Tiles read ahead stay valid.
    void drain() {
        std::unique_lock<std::mutex> lock(mu);
        auto drained = [&] { done_cv.wait(lock, [&] { return idle(); }); };
        OpRecorder* r = tl_recorder;
        if (r && r->last_on(Lane::Disk) > recorded_drained) r->host_wait(recorded_drained = r->last_on(Lane::Disk), drained);
        else drained();
    }

    // Outside a step (start-up, checkpoints, resume): n floats of state s (0
    // master, 1 m, 2 v) from element `offset` of the disk range, any span,
    // blocking. The bounce buffer is a ring buffer, after a drain: one holding
    // nothing if there is one (else a tile read ahead, dropped). write() drops
    // every tile read ahead: their copies would be stale. A dry run does nothing.
    void read(int state, size_t offset, size_t n, float* dst) { bulk(state, offset, n, (char*)dst, Io::Read); }
    void write(int state, size_t offset, size_t n, const float* src) { bulk(state, offset, n, (char*)src, Io::Write); }

    int num_tiles() const { return (int)tiles.size(); }
    const std::string& path() const { return file; }

  private:
    // A ring buffer: Free -> Reading -> Ready -> Held (begin) -> Writing (end) -> Free,
    // or -> Reading again when a read waits for its write (`queued`).
    enum class Use { Free, Reading, Ready, Held, Writing };
    struct Slot {
        char* buf = nullptr;
        Use use = Use::Free;
        int tile = -1;                    // the tile it holds, reads or writes
        int queued = -1;                  // Writing: the tile whose read follows the write
        int read_op = -1, write_op = -1;  // recording: the ops of its last read and write
    };
    enum class Io { Read, Write };
    // One request: a piece of a buffer's read or write (job: the buffer's index; buffers: a bulk transfer's).
    struct Piece {
        int job;
        char* buf;
        size_t pos, bytes;
        Io io;
    };

    void check_tile(int t) const { CHECK(t >= 0 && t < num_tiles(), "internal: disk tile %d of %d", t, num_tiles()); }
    Slot& slot_of(int t) { return slots[t % cfg.buffers]; }
    bool idle() const {
        for (const Slot& s : slots)
            if (s.use == Use::Reading || s.use == Use::Writing) return false;
        return pending[cfg.buffers] == 0;
    }
    static StepOp disk_op(OpKind kind, size_t bytes) {
        StepOp op = step_op(kind, Lane::Disk);
        op.bytes = bytes, op.dims = {(long)bytes};
        return op;
    }
    // Recording: tile t's read, asked for now (it runs after its buffer's write).
    void record_read(Slot& s, int t) {
        OpRecorder* r = tl_recorder;
        if (!r) return;
        StepOp op = disk_op(OpKind::DiskRead, 3 * state_bytes(tiles[t].n));
        op.acc = {writes_bytes(s.buf, op.bytes)};
        if (s.write_op >= 0) op.after = {s.write_op};
        s.read_op = r->add(op);
    }

    // Tile t's read queued or done. A prefetch (take = false) leaves another
    // tile's buffer alone; begin takes it from a tile read ahead (after its read).
    void want(int t, bool take, std::unique_lock<std::mutex>& lock) {
        Slot& s = slot_of(t);
        if (s.use == Use::Writing) {  // (never in a dry run: its writes are done as they are queued)
            if (s.queued != t && (s.queued < 0 || take)) s.queued = t, record_read(s, t);
            return;
        }
        if (s.use == Use::Held || (s.tile == t && s.use != Use::Free)) return;
        if (s.use != Use::Free) {
            if (!take) return;
            done_cv.wait(lock, [&] { return s.use != Use::Reading; });
        }
        record_read(s, t);
        start_read(t);
    }
    void start_read(int t) {
        Slot& s = slot_of(t);
        s.use = Use::Reading, s.tile = t;
        enqueue(t % cfg.buffers, s.buf, tile_pos[t], 3 * state_bytes(tiles[t].n), Io::Read, s.read_op);
    }

    // Queues a job's requests (the lock held); a dry run's job is done at once.
    // op: the recorded op it is (-1: none), which a traced capture stamps.
    void enqueue(int job, char* buf, size_t pos, size_t bytes, Io io, int op) {
        job_op[job] = stamps ? op : -1, job_start[job] = -1;
        if (dry) return finished(job);
        for (size_t at = 0; at < bytes; at += cfg.block_bytes)
            queue.push_back(
                {.job = job, .buf = buf + at, .pos = pos + at, .bytes = std::min(cfg.block_bytes, bytes - at), .io = io});
        pending[job] = (int)ceil_div(bytes, cfg.block_bytes);
        work_cv.notify_all();
    }
    // A job's last request is done (the lock held): a buffer's next state.
    void finished(int job) {
        if (job_op[job] >= 0) stamps->span(job_op[job], job_start[job], OpClock::now(), job);
        if (job < cfg.buffers) {
            Slot& s = slots[job];
            if (s.use == Use::Reading) s.use = Use::Ready;
            else if (s.queued >= 0) start_read(std::exchange(s.queued, -1));
            else s.use = Use::Free, s.tile = -1;
        }
        done_cv.notify_all();
    }
    void work() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            work_cv.wait(lock, [&] { return stopping || !queue.empty(); });
            if (queue.empty()) return;
            const Piece p = queue.front();
            queue.pop_front();
            if (job_start[p.job] < 0) job_start[p.job] = OpClock::now();
            lock.unlock();
            transfer(p);
            lock.lock();
            if (--pending[p.job] == 0) finished(p.job);
        }
    }
    // One request, to its last byte. An error ends the run (fail() from a worker ends the process).
    void transfer(const Piece& p) {
        const bool write = p.io == Io::Write;
        for (size_t done = 0; done < p.bytes;) {
            const size_t at = p.pos + done, left = p.bytes - done;
            const ssize_t got = write ? pwrite(fd, p.buf + done, left, (off_t)at) : pread(fd, p.buf + done, left, (off_t)at);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) fail("cannot %s %s at byte %zu: %s", write ? "write" : "read", file.c_str(), at, strerror(errno));
            if (got == 0 && write) fail("cannot write %s at byte %zu: nothing was written", file.c_str(), at);
            if (got == 0)  // never zeros in its place: the file was cut short under the run
                fail("%s is shorter than its optimizer states: a read of %zu bytes at byte %zu found its end",
                     file.c_str(), left, at);
            done += (size_t)got;
        }
    }

    // Through the bounce buffer in aligned chunks: a chunk a write covers only
    // in part is read first, to keep its other bytes.
    void bulk(int state, size_t offset, size_t n, char* user, Io io) {
        CHECK(state >= 0 && state < 3, "internal: optimizer state %d", state);
        if (dry || n == 0) return;
        std::unique_lock<std::mutex> lock(mu);
        done_cv.wait(lock, [&] { return idle(); });
        int k = -1;
        for (int i = 0; i < cfg.buffers; i++) {
            Slot& s = slots[i];
            CHECK(s.use != Use::Held, "internal: read() or write() of the states while tile %d is held", s.tile);
            if (io == Io::Write && s.use == Use::Ready) s.use = Use::Free, s.tile = -1;
            if (k < 0 && s.use == Use::Free) k = i;
        }
        k = std::max(k, 0);
        slots[k].use = Use::Free, slots[k].tile = -1;
        char* const bounce = slots[k].buf;
        // the last tile starting at or before `offset`
        size_t t = std::upper_bound(tiles.begin(), tiles.end(), offset,
                                    [](size_t e, const DiskTile& d) { return e < d.offset; }) - tiles.begin();
        t = t > 0 ? t - 1 : 0;
        for (size_t e = offset; e < offset + n; t++) {
            CHECK(t < tiles.size() && tiles[t].offset <= e && e < tiles[t].offset + tiles[t].n,
                  "internal: element %zu of the disk range is in no tile", e);
            const size_t stop = std::min(offset + n, tiles[t].offset + tiles[t].n);
            // its bytes [lo, hi) in the file, from byte `u` of the caller's
            const size_t lo = tile_pos[t] + state * state_bytes(tiles[t].n) + 4 * (e - tiles[t].offset);
            const size_t hi = lo + 4 * (stop - e), u = 4 * (e - offset);
            for (size_t a = lo / ALIGN * ALIGN; a < hi; a += slot_bytes) {
                const size_t b = std::min(round_up(hi, ALIGN), a + slot_bytes), from = std::max(a, lo),
                             to = std::min(b, hi);
                if (io == Io::Read || from > a || to < b) bulk_transfer(lock, bounce, a, b - a, Io::Read);
                if (io == Io::Read) {
                    memcpy(user + u + (from - lo), bounce + (from - a), to - from);
                    continue;
                }
                memcpy(bounce + (from - a), user + u + (from - lo), to - from);
                bulk_transfer(lock, bounce, a, b - a, Io::Write);
            }
            e = stop;
        }
    }
    void bulk_transfer(std::unique_lock<std::mutex>& lock, char* buf, size_t pos, size_t bytes, Io io) {
        enqueue(cfg.buffers, buf, pos, bytes, io, -1);
        done_cv.wait(lock, [&] { return pending[cfg.buffers] == 0; });
    }

    // Checks the directory, opens and locks the file, and allocates all of it
    // (so that a full disk shows before training, not in the middle of it).
    void open_file() {
        const char* dir = cfg.dir.c_str();
        struct stat st;
        if (stat(dir, &st) != 0)
            fail("the optimizer states' directory %s %s", dir,
                 errno == ENOENT ? "does not exist" : (std::string("cannot be read: ") + strerror(errno)).c_str());
        CHECK(S_ISDIR(st.st_mode), "the optimizer states' directory %s is not a directory", dir);
        CHECK(access(dir, W_OK | X_OK) == 0, "the optimizer states' directory %s is not writable: %s", dir,
              strerror(errno));
        const int flags = O_RDWR | O_CREAT | O_CLOEXEC;
        fd = open(file.c_str(), flags | O_DIRECT, 0644);
        if (fd < 0 && errno == EINVAL) {
            fd = open(file.c_str(), flags, 0644);
            static std::atomic<bool> said{false};  // once per process, not once per rank
            if (fd >= 0 && !said.exchange(true))
                fprintf(stderr, "note: %s does not take O_DIRECT; its states go through the page cache\n", dir);
        }
        CHECK(fd >= 0, "cannot open %s: %s", file.c_str(), strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0)
            fail("%s: %s", file.c_str(), errno == EWOULDBLOCK
                 ? ("another run is using " + cfg.dir + " for rank " + std::to_string(rank) + "'s optimizer states").c_str()
                 : (std::string("cannot lock it: ") + strerror(errno)).c_str());
        // a dead run's states would still be there under fallocate: the states start as zeros
        CHECK(ftruncate(fd, 0) == 0, "cannot truncate %s: %s", file.c_str(), strerror(errno));
        const size_t bytes = file_bytes(tiles);
        if (bytes == 0) return;
        int err = fallocate(fd, 0, 0, (off_t)bytes) == 0 ? 0 : errno;
        if (err == EOPNOTSUPP) {  // posix_fallocate may write zeros to emulate it, which O_DIRECT would refuse
            const int buffered = open(file.c_str(), O_RDWR | O_CLOEXEC);
            err = buffered < 0 ? errno : posix_fallocate(buffered, 0, (off_t)bytes);
            if (buffered >= 0) close(buffered);
        }
        if (err == ENOSPC || err == EFBIG) {
            struct statvfs vs;
            const unsigned long long free_bytes = statvfs(dir, &vs) == 0 ? (unsigned long long)vs.f_bavail * vs.f_frsize : 0;
            unlink(file.c_str());  // (what it did allocate)
            fail("no room in %s for rank %d's optimizer states: %s needs %zu bytes, %llu are free (%s)", dir, rank,
                 file.c_str(), bytes, free_bytes, strerror(err));
        }
        CHECK(err == 0, "cannot allocate %zu bytes for %s: %s", bytes, file.c_str(), strerror(err));
    }

    const DiskConfig cfg;
    const int rank;
    const std::vector<DiskTile> tiles;
    std::vector<size_t> tile_pos;  // each tile's first byte in the file
    const std::string file;
    const bool dry;      // made in a dry run: no file, no thread
    OpStamps* const stamps;  // a traced capture's clock: each read's and write's span
    size_t slot_bytes;   // one ring buffer: the largest tile's three states
    int fd = -1;
    int recorded_drained = -1;  // recording: the last disk op a drain waited for

    std::mutex mu;  // everything below, and the slots
    std::condition_variable work_cv, done_cv;
    std::vector<Slot> slots;
    std::deque<Piece> queue;
    std::vector<int> pending;  // per job: requests not done
    std::vector<int> job_op;   // per job: the op a traced capture stamps, or -1
    std::vector<double> job_start;  // per job: when its first request started (-1: not yet)
    bool stopping = false;
    std::vector<std::thread> pool;
};

// NVMe offload of the optimizer states (zero/engine/disk_states.h):
//   * steps through the ring bit for bit against the same arithmetic in
//     memory, over tile sizes (one element, not a multiple of 1024, many
//     requests a tile), ring sizes, I/O threads and queue depths, with bulk
//     reads and writes at unaligned offsets spanning tiles;
//   * a bulk write drops the tiles read ahead (served stale, they would undo it);
//   * a disk that moves fewer bytes than asked without an error, in the middle
//     of the file (as a filesystem may: a signal, a full pipe in a FUSE
//     layer), then the rest when asked again: the same bits (the I/O shim
//     below cuts transfers short);
//   * each way the disk can fail ends the run with one line naming it;
//   * the dry run: no file, no thread, the ops and their edges, and
//     check_op_order passing with them and failing without them.
#include <cmath>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include <sys/syscall.h>

#include <atomic>
#include <random>
#include <thread>

#include "test/child_process.h"
#include "test/test_util.h"
#include "zero/perf/disk_rates.h"

// The I/O shim: this program's pread and pwrite (the engine's, compiled in
// here, call these before the C library's). While g_cut_short is set, every
// transfer of more than one 4 KiB block that does not start the file moves
// only its first half (whole blocks, as O_DIRECT needs) and reports that many
// bytes, no error: the engine must ask again for the rest.
std::atomic<bool> g_cut_short{false};
std::atomic<long> g_transfers_cut{0};
static size_t shim_bytes(size_t n, off_t at) {
    if (!g_cut_short || n <= 4096 || at == 0) return n;
    g_transfers_cut++;
    return std::max<size_t>(4096, n / 2 / 4096 * 4096);
}
extern "C" ssize_t pread(int fd, void* buf, size_t n, off_t at) {
    return syscall(SYS_pread64, fd, buf, shim_bytes(n, at), at);
}
extern "C" ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
    return syscall(SYS_pwrite64, fd, buf, shim_bytes(n, at), at);
}

namespace {

std::string g_root;  // the test's own directory, made afresh

std::string fresh_dir(const std::string& name) {
    const std::string dir = g_root + "/" + name;
    CHECK(system(("rm -rf '" + dir + "'").c_str()) == 0, "cannot remove %s", dir.c_str());
    make_dir(dir);
    return dir;
}

int entries_in(const std::string& dir) {
    int n = 0;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

// A step's update of one tile, the same code for the ring's buffers and the oracle's arrays.
__attribute__((noinline)) void update(float* master, float* m, float* v, size_t n, int t) {
    for (size_t i = 0; i < n; i++) {
        master[i] = master[i] * 1.5f + m[i];
        m[i] += 1.0f;
        v[i] = v[i] * 2.0f - (float)t;
    }
}

// Maximal runs of elements that tiles cover without a gap: [first, last).
std::vector<std::pair<size_t, size_t>> covered_runs(const std::vector<DiskTile>& tiles) {
    std::vector<std::pair<size_t, size_t>> runs;
    for (const DiskTile& d : tiles) {
        if (!runs.empty() && runs.back().second == d.offset) runs.back().second += d.n;
        else runs.push_back({d.offset, d.offset + d.n});
    }
    return runs;
}

std::vector<DiskTile> random_tiles(std::mt19937& rng, bool gaps) {
    std::vector<DiskTile> tiles;
    size_t at = gaps ? 37 : 0;
    const int count = 4 + (int)(rng() % 4);
    for (int t = 0; t < count; t++) {
        size_t n;
        switch (rng() % 4) {
            case 0: n = 1 + rng() % 50; break;
            case 1: n = 1024 * (1 + rng() % 4); break;
            case 2: n = 1 + rng() % 6000; break;
            default: n = 6000 + rng() % 14000; break;  // tens of requests at 4 KiB
        }
        tiles.push_back({at, n});
        at += n + (gaps && rng() % 2 ? 1 + rng() % 3000 : 0);
    }
    tiles[rng() % count].n = 1;  // (the gap after it grows: still no overlap)
    for (size_t t = 1; t < tiles.size(); t++) tiles[t].offset = std::max(tiles[t].offset, tiles[t - 1].offset + tiles[t - 1].n);
    return tiles;
}

// The ring against the oracle: 3 steps, bulk I/O before, between and after.
void oracle_case(std::mt19937& rng, int buffers, int threads, int queue_depth, size_t block_bytes, bool gaps) {
    char what[160];
    snprintf(what, sizeof(what), "buffers %d, threads %d, queue depth %d, block %zu%s", buffers, threads, queue_depth,
             block_bytes, gaps ? ", gaps" : "");
    const std::vector<DiskTile> tiles = random_tiles(rng, gaps);
    const auto runs = covered_runs(tiles);
    const size_t range = runs.back().second;
    std::vector<float> oracle[3];
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (auto& s : oracle) {
        s.assign(range, 0.0f);
        for (float& x : s) x = value(rng);
    }
    DiskConfig cfg;
    cfg.dir = fresh_dir("oracle"), cfg.buffers = buffers, cfg.threads = threads, cfg.queue_depth = queue_depth;
    cfg.block_bytes = block_bytes;
    std::string path = cfg.dir + "/zero_states_rank0.bin";
    {  // a dead run's file, full of NaNs: the states must start as zeros all the same
        std::vector<unsigned char> junk(DiskStates::file_bytes(tiles), 0xFF);
        FILE* f = open_file(path, "wb");
        write_exact(f, junk.data(), junk.size(), path);
        fclose(f);
    }
    {
        MemoryAccountant mem(0);
        DiskStates ds(cfg, 0, tiles, mem);
        EXPECT(ds.path() == path, "%s: the file is %s", what, ds.path().c_str());
        size_t largest = 0;
        for (const DiskTile& d : tiles) largest = std::max(largest, d.n);
        struct stat st;
        EXPECT(stat(path.c_str(), &st) == 0 && (size_t)st.st_size == DiskStates::file_bytes(tiles),
               "%s: the file holds all of its bytes from the start", what);
        EXPECT(mem.reserved_bytes().get(Arena::Disk, MemKind::Optimizer) == DiskStates::file_bytes(tiles) &&
                   mem.reserved_bytes().get(Arena::Host, MemKind::Optimizer) == DiskStates::ring_bytes(buffers, largest),
               "%s: the accountant counts the file and the ring", what);
        for (const DiskTile& d : {tiles.front(), tiles.back()})
            for (int s = 0; s < 3; s++) {
                std::vector<float> got(d.n, 1.0f);
                ds.read(s, d.offset, d.n, got.data());
                EXPECT(std::all_of(got.begin(), got.end(), [](float x) { return x == 0.0f; }),
                       "%s: state %d starts as zeros", what, s);
            }
        // bulk writes in pieces of any length, spanning tiles
        for (int s = 0; s < 3; s++)
            for (const auto& run : runs)
                for (size_t at = run.first; at < run.second;) {
                    const size_t n = std::min(run.second - at, (size_t)(1 + rng() % 9000));
                    ds.write(s, at, n, oracle[s].data() + at);
                    at += n;
                }
        auto check_spans = [&](const char* when) {
            for (int k = 0; k < 6; k++) {
                const auto& run = runs[rng() % runs.size()];
                const size_t at = run.first + rng() % (run.second - run.first);
                const size_t n = 1 + rng() % (run.second - at);
                const int s = (int)(rng() % 3);
                std::vector<float> span(n);
                ds.read(s, at, n, span.data());
                EXPECT(memcmp(span.data(), oracle[s].data() + at, n * 4) == 0, "%s: state %d [%zu, %zu) %s", what, s,
                       at, at + n, when);
            }
        };
        check_spans("as written");
        for (int step = 0; step < 3; step++) {
            auto run_step = [&] {
                ds.prefetch(0);
                for (int t = 0; t < ds.num_tiles(); t++) {
                    DiskStates::View v = ds.begin(t);
                    update(v.master, v.m, v.v, tiles[t].n, t);
                    ds.end(t);
                }
                ds.prefetch(0);  // the next step's first read, as the engine hides it
                ds.drain();
            };
            if (step == 1) std::thread(run_step).join();  // (the delayed update calls from its own thread)
            else run_step();
            for (int t = 0; t < (int)tiles.size(); t++)
                update(&oracle[0][tiles[t].offset], &oracle[1][tiles[t].offset], &oracle[2][tiles[t].offset],
                       tiles[t].n, t);
            check_spans("after a step");
        }
        for (int s = 0; s < 3; s++)
            for (const auto& run : runs) {
                std::vector<float> all(run.second - run.first);
                ds.read(s, run.first, all.size(), all.data());
                EXPECT(memcmp(all.data(), oracle[s].data() + run.first, all.size() * 4) == 0,
                       "%s: state %d after 3 steps", what, s);
            }
    }
    EXPECT(!file_exists(path), "%s: the file goes with its DiskStates", what);
}

// A bulk write after a prefetch: the tiles read ahead must be read again.
void stale_case(bool drain_first) {
    DiskConfig cfg;
    cfg.dir = fresh_dir("stale"), cfg.buffers = 3, cfg.block_bytes = 4096;
    const std::vector<DiskTile> tiles = {{0, 3000}, {3000, 3000}, {6000, 3000}, {9000, 3000}};
    MemoryAccountant mem(0);
    DiskStates ds(cfg, 0, tiles, mem);
    std::vector<float> old_values(12000, 1.0f), new_values(4000, 2.0f);
    for (int s = 0; s < 3; s++) ds.write(s, 0, old_values.size(), old_values.data());
    ds.prefetch(0), ds.prefetch(1);
    if (drain_first) ds.drain();
    ds.write(1, 5, new_values.size(), new_values.data());  // tile 0's m from element 5, and tile 1's
    for (int t = 0; t < 2; t++) {
        DiskStates::View v = ds.begin(t);
        bool fresh = true;
        for (size_t i = 0; i < 3000; i++) {
            const size_t e = 3000 * t + i;
            fresh = fresh && v.m[i] == (e >= 5 && e < 4005 ? 2.0f : 1.0f) && v.master[i] == 1.0f && v.v[i] == 1.0f;
        }
        EXPECT(fresh, "tile %d after a bulk write (%s): its new values, not the ones read ahead", t,
               drain_first ? "the prefetch done" : "the prefetch in flight");
        ds.end(t);
    }
}

// fn must end the process with status 1 and one "error:" line holding every part ("note:" lines aside).
void expect_error(const std::string& what, const std::function<void()>& fn, const std::vector<std::string>& parts) {
    ChildResult r = wait_child(start_child([&] { return fn(), 0; }, 60));
    std::string errors;
    for (size_t at = 0; at < r.err.size();) {
        const size_t end = std::min(r.err.find('\n', at), r.err.size());
        const std::string line = r.err.substr(at, end - at);
        if (line.rfind("note: ", 0) != 0) errors += line + "\n";
        at = end + 1;
    }
    EXPECT(r.status == 1, "%s: expected exit status 1, got %d (stderr: %s)", what.c_str(), r.status, r.err.c_str());
    EXPECT(std::count(errors.begin(), errors.end(), '\n') == 1 && errors.rfind("error: ", 0) == 0,
           "%s: expected one \"error:\" line: %s", what.c_str(), r.err.c_str());
    for (const std::string& part : parts)
        EXPECT(errors.find(part) != std::string::npos, "%s: stderr lacks \"%s\": %s", what.c_str(), part.c_str(),
               r.err.c_str());
}

void fault_cases() {
    const std::vector<DiskTile> tiles = {{0, 100000}, {100000, 100000}, {200000, 77777}};  // 3.3 MB
    const size_t bytes = DiskStates::file_bytes(tiles);
    auto make = [&](const std::string& dir) {
        DiskConfig cfg;
        cfg.dir = dir;
        return cfg;
    };
    expect_error("a missing directory", [&] {
        MemoryAccountant mem(0);
        DiskStates ds(make(g_root + "/no_such_dir"), 0, tiles, mem);
    }, {"no_such_dir", "does not exist"});
    const std::string file = fresh_dir("faults") + "/a_file";
    fclose(open_file(file, "wb"));
    expect_error("a regular file for a directory", [&] {
        MemoryAccountant mem(0);
        DiskStates ds(make(file), 0, tiles, mem);
    }, {"a_file", "not a directory"});
    if (geteuid() == 0) {
        printf("skipped: a directory without write permission (root writes anyway)\n");
    } else {
        const std::string locked = fresh_dir("read_only");
        chmod(locked.c_str(), 0500);
        expect_error("a directory without write permission", [&] {
            MemoryAccountant mem(0);
            DiskStates ds(make(locked), 0, tiles, mem);
        }, {"read_only", "not writable"});
        chmod(locked.c_str(), 0755);
    }
    const std::string dir = fresh_dir("faults_run");
    {  // two ranks beside each other are fine
        MemoryAccountant mem(0);
        DiskStates a(make(dir), 0, tiles, mem), b(make(dir), 1, tiles, mem);
        EXPECT(a.path() != b.path() && entries_in(dir) == 2, "one file per rank");
    }
    expect_error("two runs on one directory", [&] {
        MemoryAccountant mem(0);
        DiskStates a(make(dir), 0, tiles, mem);
        DiskStates b(make(dir), 0, tiles, mem);
    }, {"another run is using", "rank 0"});
    expect_error("a disk too small", [&] {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {1 << 20, 1 << 20};
        setrlimit(RLIMIT_FSIZE, &lim);
        MemoryAccountant mem(0);
        DiskStates ds(make(dir), 0, tiles, mem);
    }, {"no room", std::to_string(bytes) + " bytes"});
    EXPECT(entries_in(dir) == 0, "a file that did not fit is removed");
    expect_error("a write refused mid-run", [&] {
        MemoryAccountant mem(0);
        DiskStates ds(make(dir), 0, tiles, mem);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {1 << 20, 1 << 20};
        setrlimit(RLIMIT_FSIZE, &lim);
        ds.begin(2), ds.end(2);
        ds.drain();
    }, {"cannot write", "zero_states_rank0.bin", "at byte"});
    const size_t cut = round_up(bytes / 2, 4096);
    expect_error("a file cut short mid-run", [&] {
        MemoryAccountant mem(0);
        DiskConfig one_request = make(dir);  // (one worker: the first request past the end is the one that fails)
        one_request.queue_depth = 1;
        DiskStates ds(one_request, 0, tiles, mem);
        std::vector<float> ones(277777, 1.0f);
        ds.write(0, 0, ones.size(), ones.data());
        CHECK(truncate(ds.path().c_str(), (off_t)cut) == 0, "truncate failed");
        for (int t = 0; t < ds.num_tiles(); t++) ds.begin(t), ds.end(t);
        ds.drain();
    }, {"zero_states_rank0.bin", "shorter", "at byte " + std::to_string(cut)});
}

int threads_now() { return entries_in("/proc/self/task"); }

// Two steps over 5 tiles in 2 buffers, the AdamW on `lane`, recorded.
void dry_steps(OpRecorder& rec, Lane lane, const std::vector<DiskTile>& tiles) {
    const int before = threads_now();
    tl_recorder = &rec;
    {
        MemoryAccountant mem(0);
        DiskConfig cfg;
        cfg.dir = fresh_dir("dry"), cfg.buffers = 2;
        DiskStates ds(cfg, 0, tiles, mem);
        EXPECT(threads_now() == before && entries_in(cfg.dir) == 0, "a dry run starts no thread and opens no file");
        EXPECT(mem.reserved_bytes().get(Arena::Disk, MemKind::Optimizer) == DiskStates::file_bytes(tiles),
               "a dry run counts the file");
        std::vector<float> some(100, 1.0f);
        ds.write(0, 3, some.size(), some.data());  // (bulk: nothing recorded, nothing done)
        ds.read(1, 3, some.size(), some.data());
        EXPECT(rec.ops.empty(), "bulk reads and writes record nothing");
        rec.host_lane = lane;
        for (int step = 0; step < 2; step++) {
            rec.step = step;
            ds.prefetch(0);
            for (int t = 0; t < ds.num_tiles(); t++) {
                DiskStates::View v = ds.begin(t);
                const size_t n = tiles[t].n;
                host_work("cpu_adamw_f32", (long)n, {writes(v.master, n), writes(v.m, n), writes(v.v, n)}, [] {});
                ds.end(t);
            }
            ds.drain();
        }
        rec.host_lane = Lane::Host;
        EXPECT(entries_in(cfg.dir) == 0, "still no file");
    }
    tl_recorder = nullptr;
}

void dry_run_case() {
    std::vector<DiskTile> tiles;  // sizes that tell the tiles apart by their bytes
    for (size_t t = 0, at = 0; t < 5; at += tiles.back().n, t++) tiles.push_back({at, 1000 * (t + 1) + 7});
    const int T = 5, B = 2;
    auto tile_of = [&](const StepOp& op) {
        for (int t = 0; t < T; t++)
            if (op.bytes == 3 * DiskStates::state_bytes(tiles[t].n)) return t;
        return -1;
    };
    for (Lane lane : {Lane::Host, Lane::Update}) {
        const char* where = lane == Lane::Host ? "the AdamW on the rank's thread" : "the AdamW on the update thread";
        OpRecorder rec(Recording::Dry);
        dry_steps(rec, lane, tiles);
        int counts[4] = {};
        auto find = [&](const char* kind, int step, int tile) {
            for (size_t i = 0; i < rec.ops.size(); i++)
                if (rec.ops[i].name == kind && rec.ops[i].step == step && tile_of(rec.ops[i]) == tile) return (int)i;
            return -1;
        };
        for (size_t i = 0; i < rec.ops.size(); i++) {
            const StepOp& op = rec.ops[i];
            const bool disk = op.name == "disk_read" || op.name == "disk_write";
            EXPECT(disk || op.name == "host_wait" || op.name == "cpu_adamw_f32", "%s: op %zu is a %s", where, i,
                   op.name.c_str());
            EXPECT(op.lane == (disk ? Lane::Disk : lane), "%s: %s on lane %d", where, op.name.c_str(), (int)op.lane);
            counts[0] += op.name == "disk_read", counts[1] += op.name == "disk_write";
            counts[2] += op.name == "cpu_adamw_f32", counts[3] += op.name == "host_wait";
            const int t = tile_of(op);
            if (op.name == "disk_read") {  // after the write of its buffer's tile before it
                const int prev = t >= B ? find("disk_write", op.step, t - B)
                                 : op.step > 0 ? find("disk_write", op.step - 1, (T - 1 - t) / B * B + t) : -1;
                EXPECT(op.after == (prev >= 0 ? std::vector<int>{prev} : std::vector<int>{}),
                       "%s: step %d's read of tile %d waits for op %d", where, op.step, t, prev);
                EXPECT(op.bytes == 3 * DiskStates::state_bytes(tiles[t].n) && op.dims == std::vector<long>{(long)op.bytes},
                       "%s: a read's bytes", where);
            }
            if (op.name == "cpu_adamw_f32") {  // after a wait for its tile's read
                int u = 0;
                while (u < T && (long)tiles[u].n != op.dims[0]) u++;
                const int read = find("disk_read", op.step, u);
                EXPECT(read >= 0 && i > 0 && rec.ops[i - 1].name == "host_wait" &&
                           rec.ops[i - 1].after == std::vector<int>{read},
                       "%s: step %d's AdamW of tile %d comes after a wait for its read (op %d)", where, op.step, u,
                       read);
            }
            if (op.name == "disk_write")
                EXPECT(i > 0 && rec.ops[i - 1].name == "cpu_adamw_f32" && op.after == std::vector<int>{(int)i - 1},
                       "%s: op %zu, a write, waits for the AdamW before it", where, i);
        }
        EXPECT(counts[0] == 2 * T && counts[1] == 2 * T && counts[2] == 2 * T && counts[3] == 2 * T + 2,
               "%s: %d reads, %d writes, %d AdamWs, %d waits", where, counts[0], counts[1], counts[2], counts[3]);
        ChildResult ok = run_in_child([&] { check_op_order(rec, 0); });
        EXPECT(ok.status == 0, "%s: check_op_order refused the list: %s", where, ok.err.c_str());

        // Without their edges the list must fail: the disk lane is one agent, so
        // a read's edge to its buffer's write is the lane's order already; the
        // waits and the writes' edges are what order the buffer between lanes.
        OpRecorder no_waits = rec;
        for (StepOp& op : no_waits.ops)
            if (op.name == "host_wait") op.after.clear();
        expect_failure(std::string(where) + ", no waits for the reads", [&] { check_op_order(no_waits, 0); },
                       "disk_ring");
        if (lane == Lane::Update) {  // (on the rank's thread the lane's own order puts a write after its AdamW)
            OpRecorder no_edges = rec;
            for (StepOp& op : no_edges.ops)
                if (op.name == "disk_write") op.after.clear();
            expect_failure(std::string(where) + ", writes without their edge", [&] { check_op_order(no_edges, 0); },
                           "disk_ring");
        }
    }
}

}  // namespace

// The disk's plain rates (bench_nvme's reference, --calibrate's disk): one
// request at a time and many, a size not a whole number of blocks; the file
// gone after, rates finite and positive (the engine's own bytes are held
// above; here, that the workers split the file without a gap or a hang).
void plain_rates_case() {
    const std::string dir = fresh_dir("plain");
    for (int in_flight : {1, 5}) {
        bool direct = false;
        double w = 0, r = 0;
        plain_disk_rates(dir + "/rates.bin", (9 << 20) + 100, 1 << 20, in_flight, direct, w, r);
        EXPECT(std::isfinite(w) && w > 0 && std::isfinite(r) && r > 0, "%d in flight: write %g, read %g GB/s",
               in_flight, w, r);
        EXPECT(entries_in(dir) == 0, "%d in flight: the file is removed", in_flight);
    }
}

int main() {
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof(cwd)) != nullptr, "getcwd failed");
    g_root = std::string(cwd) + "/disk_states_test";
    fresh_dir("");
    std::mt19937 rng(1234);
    const size_t blocks[] = {4096, 12288, 1 << 20};
    int k = 0;
    for (int buffers : {1, 2, 3, 4})
        for (int threads : {1, 3})
            for (int queue_depth : {1, 4}) {
                oracle_case(rng, buffers, threads, queue_depth, blocks[k % 3], k % 5 == 4);
                k++;
            }
    // transfers cut short, mid-file, with no error: bit for bit all the same
    g_cut_short = true;
    for (size_t block : {(size_t)12288, (size_t)1 << 20}) oracle_case(rng, 2, 2, 2, block, false);
    g_cut_short = false;
    EXPECT(g_transfers_cut > 0, "the shim cut no transfer short");
    stale_case(true);
    stale_case(false);
    fault_cases();
    dry_run_case();
    plain_rates_case();
    CHECK(system(("rm -rf '" + g_root + "'").c_str()) == 0, "cannot remove %s", g_root.c_str());
    return test_summary("test_disk_states");
}

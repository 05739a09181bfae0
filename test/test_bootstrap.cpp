// The rendezvous (zero/comm/bootstrap.h) and launcher detection (zero/comm/launcher.h),
// on the CPU: every rank is a forked process meeting the others over loopback
// TCP (or through a file), so fail() exits, exit statuses and stderr can be
// observed as a launcher would see them.
//
//   test_bootstrap bootstrap   the rendezvous
//   test_bootstrap launcher    detect_launch_env()
//   test_bootstrap             both
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test/child_process.h"
#include "test/test_util.h"
#include "zero/comm/bootstrap.h"
#include "zero/comm/launcher.h"

namespace {

// ----------------------------------------------------------------------------
// processes

// Every variable a launcher or the bootstrap reads: children start without them.
void clear_launch_env() {
    const char* vars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                          "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID",
                          "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                          "ZERO_BOOTSTRAP_TIMEOUT", "ZERO_NCCL_ID_FILE", "ZERO_JOB_ID", "PMIX_NAMESPACE",
                          "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"};
    for (const char* v : vars) unsetenv(v);
}

// Runs fn as a launcher would start a rank: a process of its own (stderr into a
// pipe, fn's return its exit code) without the test's launch variables, and with
// an alarm, so that a hang becomes a failed check rather than a stuck suite.
Child spawn(const std::function<int()>& fn) {
    return start_child(
        [&] {
            clear_launch_env();
            return fn();
        },
        60);
}

ChildResult run_child(const std::function<int()>& fn) { return wait_child(spawn(fn)); }

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A port nobody listens on right now: bind port 0, read it back, close.
int free_port() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    CHECK(bind(s, (sockaddr*)&a, sizeof(a)) == 0, "bind failed: %s", strerror(errno));
    socklen_t len = sizeof(a);
    CHECK(getsockname(s, (sockaddr*)&a, &len) == 0, "getsockname failed");
    close(s);
    return ntohs(a.sin_port);
}

// ----------------------------------------------------------------------------
// a world of ranks

struct RankSpec {
    BootstrapRecord rec;  // rank, world, host, gpu
    int delay_ms = 0;     // start this much later
};

BootstrapOptions tcp_options(int port, double timeout_s = 20.0) {
    BootstrapOptions o;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.timeout_s = timeout_s;
    o.job_tag = "ZERO_JOB_ID=test";
    return o;
}

// What rank 0's callback makes of the records: a description of every record in
// the order it got them, then `extra` bytes of a pattern (a large payload
// exercises partial reads and writes).
std::vector<uint8_t> describe(const std::vector<BootstrapRecord>& recs, size_t extra) {
    std::string s;
    for (const BootstrapRecord& r : recs)
        s += std::to_string(r.rank) + "/" + std::to_string(r.world) + "/" + r.host + "/" + r.gpu + ";";
    std::vector<uint8_t> b(s.begin(), s.end());
    for (size_t i = 0; i < extra; i++) b.push_back((uint8_t)(i * 131 + i / 977));
    return b;
}

// A rank that rendezvouses and checks it got `expected`: exit 0 if so, 2 if not.
int rank_main(const RankSpec& spec, const BootstrapOptions& o, const std::vector<uint8_t>& expected,
              const BootstrapPayloadFn& fn) {
    if (spec.delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(spec.delay_ms));
    LaunchEnv env;
    env.rank = spec.rec.rank;
    env.world = spec.rec.world;
    env.local_rank = spec.rec.rank;
    std::vector<uint8_t> got = rendezvous(env, spec.rec, fn, o);
    if (got != expected) {
        fprintf(stderr, "rank %d: wrong payload (%zu bytes, expected %zu)\n", spec.rec.rank, got.size(),
                expected.size());
        return 2;
    }
    return 0;
}

std::vector<ChildResult> run_world(const std::vector<RankSpec>& specs, const BootstrapOptions& o,
                                   const std::vector<uint8_t>& expected, const BootstrapPayloadFn& fn) {
    std::vector<Child> kids;
    for (const RankSpec& s : specs) kids.push_back(spawn([&] { return rank_main(s, o, expected, fn); }));
    std::vector<ChildResult> out;
    for (Child& c : kids) out.push_back(wait_child(c));
    return out;
}

std::vector<RankSpec> make_world(int n, const std::string& host = "node1") {
    std::vector<RankSpec> specs(n);
    for (int r = 0; r < n; r++) {
        specs[r].rec.rank = r;
        specs[r].rec.world = n;
        specs[r].rec.host = host;
        char bus[32];
        snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x18 + r);
        specs[r].rec.gpu = bus;
    }
    return specs;
}

std::vector<BootstrapRecord> records_of(const std::vector<RankSpec>& specs) {
    std::vector<BootstrapRecord> recs;
    for (const RankSpec& s : specs) recs.push_back(s.rec);
    std::sort(recs.begin(), recs.end(), [](const BootstrapRecord& a, const BootstrapRecord& b) { return a.rank < b.rank; });
    return recs;
}

BootstrapPayloadFn describing(size_t extra) {
    return [extra](const std::vector<BootstrapRecord>& recs) { return describe(recs, extra); };
}

void expect_all_ok(const char* what, const std::vector<ChildResult>& rs) {
    for (size_t i = 0; i < rs.size(); i++)
        EXPECT(rs[i].status == 0, "%s: process %zu exited %d: %s", what, i, rs[i].status, rs[i].err.c_str());
}

// Every process exits 1 with the same single line, which contains `part`.
void expect_all_fail_alike(const char* what, const std::vector<ChildResult>& rs, const std::string& part) {
    for (size_t i = 0; i < rs.size(); i++) {
        EXPECT(rs[i].status == 1, "%s: process %zu exited %d (expected 1): %s", what, i, rs[i].status,
               rs[i].err.c_str());
        EXPECT(rs[i].err.find(part) != std::string::npos, "%s: process %zu's stderr lacks \"%s\": %s", what, i,
               part.c_str(), rs[i].err.c_str());
        EXPECT(rs[i].err.rfind("error: ", 0) == 0 && std::count(rs[i].err.begin(), rs[i].err.end(), '\n') == 1,
               "%s: process %zu: not one error line: %s", what, i, rs[i].err.c_str());
        EXPECT(rs[i].err == rs[0].err, "%s: processes 0 and %zu print different errors:\n%s%s", what, i,
               rs[0].err.c_str(), rs[i].err.c_str());
    }
}

void expect_fail(const char* what, const ChildResult& r, const std::string& part) {
    EXPECT(r.status == 1, "%s: exited %d (expected 1): %s", what, r.status, r.err.c_str());
    EXPECT(r.err.find(part) != std::string::npos, "%s: stderr lacks \"%s\": %s", what, part.c_str(), r.err.c_str());
    EXPECT(std::count(r.err.begin(), r.err.end(), '\n') == 1, "%s: the error should be one line: %s", what,
           r.err.c_str());
}

// ----------------------------------------------------------------------------
// TCP rendezvous

void test_tcp_worlds() {
    for (int n : {1, 2, 4}) {
        // rank 0 starts last, so the others must retry refused connections
        std::vector<RankSpec> specs = make_world(n);
        specs[0].delay_ms = n > 1 ? 300 : 0;
        BootstrapOptions o = tcp_options(free_port());
        std::vector<uint8_t> expected = describe(records_of(specs), 128);
        std::string what = "tcp world of " + std::to_string(n);
        expect_all_ok(what.c_str(), run_world(specs, o, expected, describing(128)));
    }
    {  // rank 0 first, the others late and in reverse order; a 4 MiB payload
        std::vector<RankSpec> specs = make_world(3);
        specs[1].delay_ms = 200, specs[2].delay_ms = 100;
        BootstrapOptions o = tcp_options(free_port());
        std::vector<uint8_t> expected = describe(records_of(specs), 4u << 20);
        expect_all_ok("tcp large payload", run_world(specs, o, expected, describing(4u << 20)));
    }
    {  // MASTER_ADDR as a host name
        std::vector<RankSpec> specs = make_world(2);
        BootstrapOptions o = tcp_options(free_port());
        o.master_addr = "localhost";
        expect_all_ok("tcp via localhost", run_world(specs, o, describe(records_of(specs), 0), describing(0)));
    }
    {  // the same bus ids on different hosts are different GPUs; empty bus ids are not compared
        std::vector<RankSpec> specs = make_world(4);
        specs[2].rec.host = specs[3].rec.host = "node2";
        specs[2].rec.gpu = specs[0].rec.gpu;
        specs[3].rec.gpu = specs[1].rec.gpu;
        BootstrapOptions o = tcp_options(free_port());
        expect_all_ok("same bus ids on two hosts", run_world(specs, o, describe(records_of(specs), 0), describing(0)));
        std::vector<RankSpec> none = make_world(3);
        for (RankSpec& s : none) s.rec.gpu.clear();
        o = tcp_options(free_port());
        expect_all_ok("no gpu ids", run_world(none, o, describe(records_of(none), 0), describing(0)));
    }
}

void test_tcp_errors() {
    {  // two ranks on one GPU (bus ids compared without case): every rank fails with the same line
        std::vector<RankSpec> specs = make_world(3, "h1");
        specs[0].rec.gpu = "0000:1A:00.0";
        specs[2].rec.gpu = "0000:1a:00.0";
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port()), {}, describing(0));
        expect_all_fail_alike("duplicate gpu", rs,
                              "error: ranks 0 and 2 both use GPU 0000:1a:00.0 on host h1: NCCL cannot run two ranks "
                              "on one GPU; to emulate N ranks on one GPU run one process with --ranks N");
    }
    {  // ... also between two non-zero ranks, and without waiting for a rank that never comes
        std::vector<RankSpec> specs = make_world(5, "h2");
        specs[3].rec.gpu = specs[1].rec.gpu;
        specs.pop_back();  // rank 4 never starts
        auto t0 = std::chrono::steady_clock::now();
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port(), 60.0), {}, describing(0));
        double took = seconds_since(t0);
        expect_all_fail_alike("duplicate gpu, rank missing", rs, "ranks 1 and 3 both use GPU 0000:19:00.0 on host h2");
        EXPECT(took < 20.0, "an impossible job should fail soon, not after the timeout (took %.1f s)", took);
    }
    {  // world sizes disagree
        std::vector<RankSpec> specs = make_world(2);
        specs[1].rec.world = 3;
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port()), {}, describing(0));
        expect_all_fail_alike("world mismatch", rs, "rank 1 (host node1) was started as one of 3 ranks, but rank 0 as one of 2");
    }
    {  // two processes claim the same rank
        std::vector<RankSpec> specs = make_world(3);
        specs[2].rec.rank = 1;
        specs[2].rec.host = "node9";
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port()), {}, describing(0));
        expect_all_fail_alike("duplicate rank", rs, "both claim rank 1");
    }
    {  // rank 0 times out: the connected ranks hear which ranks never came
        std::vector<RankSpec> specs = make_world(4);
        specs.erase(specs.begin() + 2);  // ranks 0, 1, 3
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port(), 1.0), {}, describing(0));
        expect_all_fail_alike("rank 0 timeout", rs, "rank(s) 2 of 4 never connected");
    }
    {  // a rank alone: rank 0 never starts
        std::vector<RankSpec> specs = make_world(4);
        int port = free_port();
        auto t0 = std::chrono::steady_clock::now();
        ChildResult r = run_child([&] { return rank_main(specs[3], tcp_options(port, 0.5), {}, describing(0)); });
        double took = seconds_since(t0);
        char want[128];
        snprintf(want, sizeof(want), "error: rank 3 could not reach rank 0 at 127.0.0.1:%d within 0.5 s", port);
        expect_fail("client timeout", r, want);
        EXPECT(took >= 0.5 && took < 5.0, "client timeout took %.2f s for a 0.5 s limit", took);
    }
    {  // rank 0's callback throws: its message reaches every rank
        std::vector<RankSpec> specs = make_world(3);
        BootstrapPayloadFn thrower = [](const std::vector<BootstrapRecord>&) -> std::vector<uint8_t> {
            throw std::runtime_error("rank 0: no id for you");
        };
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port()), {}, thrower);
        expect_all_fail_alike("payload throws", rs, "error: rank 0: no id for you");
    }
    {  // rank 0 dies without answering
        std::vector<RankSpec> specs = make_world(2);
        BootstrapPayloadFn dies = [](const std::vector<BootstrapRecord>&) -> std::vector<uint8_t> { _exit(3); };
        std::vector<ChildResult> rs = run_world(specs, tcp_options(free_port()), {}, dies);
        EXPECT(rs[0].status == 3, "rank 0 should have died with 3, got %d", rs[0].status);
        expect_fail("rank 0 died", rs[1], "rank 1 got no rendezvous reply from rank 0");
    }
    {  // the port is taken
        int s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(a);
        CHECK(bind(s, (sockaddr*)&a, sizeof(a)) == 0 && listen(s, 4) == 0 && getsockname(s, (sockaddr*)&a, &len) == 0,
              "cannot occupy a port");
        int port = ntohs(a.sin_port);
        std::vector<RankSpec> specs = make_world(2);
        ChildResult r = run_child([&] { return rank_main(specs[0], tcp_options(port), {}, describing(0)); });
        close(s);
        expect_fail("port in use", r, "rank 0 cannot listen on 127.0.0.1:" + std::to_string(port));
    }
}

// A connection that is not one of ours must not disturb the rendezvous: garbage,
// silence, and a well-formed record of another job (which is told so).
void test_tcp_strays() {
    std::vector<RankSpec> specs = make_world(3);
    specs[1].delay_ms = specs[2].delay_ms = 1000;  // the strays get in first
    BootstrapOptions o = tcp_options(free_port());
    auto connect_retry = [&]() {
        for (int i = 0; i < 400; i++) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons((uint16_t)o.master_port);
            if (connect(s, (sockaddr*)&a, sizeof(a)) == 0) return s;
            close(s);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return -1;
    };
    std::vector<Child> kids;
    for (const RankSpec& s : specs)
        kids.push_back(spawn([&] { return rank_main(s, o, describe(records_of(specs), 0), describing(0)); }));
    Child garbage = spawn([&] {
        int s = connect_retry();
        if (s < 0) return 2;
        std::vector<uint8_t> junk(600, 'x');
        (void)!write(s, junk.data(), junk.size());
        std::this_thread::sleep_for(std::chrono::seconds(1));
        close(s);
        return 0;
    });
    Child silent = spawn([&] {
        int s = connect_retry();
        if (s < 0) return 2;
        std::this_thread::sleep_for(std::chrono::seconds(2));
        close(s);
        return 0;
    });
    Child other_job = spawn([&] {  // a rank of another job: gets an error reply
        BootstrapOptions mine = o;
        mine.job_tag = "ZERO_JOB_ID=other";
        mine.timeout_s = 10;
        RankSpec s = specs[1];
        LaunchEnv env;
        env.rank = s.rec.rank, env.world = s.rec.world;
        rendezvous(env, s.rec, describing(0), mine);
        return 0;
    });
    std::vector<ChildResult> rs;
    for (Child& c : kids) rs.push_back(wait_child(c));
    expect_all_ok("with stray connections", rs);
    EXPECT(wait_child(garbage).status == 0, "the garbage stray could not connect");
    EXPECT(wait_child(silent).status == 0, "the silent stray could not connect");
    expect_fail("another job's rank", wait_child(other_job), "belongs to another job (ZERO_JOB_ID=test; yours: ZERO_JOB_ID=other)");
}

// The whole path from the environment: detect_launch_env + bootstrap_options_from_env.
void test_from_env() {
    int port = free_port();
    std::vector<Child> kids;
    for (int r = 0; r < 3; r++)
        kids.push_back(spawn([=] {
            setenv("RANK", std::to_string(r).c_str(), 1);
            setenv("WORLD_SIZE", "3", 1);
            setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
            setenv("ZERO_BOOTSTRAP_TIMEOUT", "20", 1);
            setenv("ZERO_JOB_ID", "envjob", 1);
            LaunchEnv env = detect_launch_env();
            BootstrapRecord rec;
            rec.rank = env.rank, rec.world = env.world, rec.host = "envhost", rec.gpu = "";
            std::vector<uint8_t> got = rendezvous(env, rec, [](const std::vector<BootstrapRecord>& recs) {
                return std::vector<uint8_t>{(uint8_t)recs.size(), 42};
            });
            return got == std::vector<uint8_t>{3, 42} ? 0 : 2;
        }));
    std::vector<ChildResult> rs;
    for (Child& c : kids) rs.push_back(wait_child(c));
    expect_all_ok("rendezvous from the environment", rs);
}

// ----------------------------------------------------------------------------
// file rendezvous

void test_file() {
    std::string path = "bootstrap_id_" + std::to_string(getpid()) + ".bin";
    unlink(path.c_str());
    {  // a stale file of another job is there first; rank 0 starts last
        BootstrapOptions stale_o = tcp_options(0);
        stale_o.id_file = path;
        stale_o.job_tag = "ZERO_JOB_ID=old";
        std::vector<RankSpec> old = make_world(7);
        ChildResult w = run_child([&] { return rank_main(old[0], stale_o, describe({old[0].rec}, 0), describing(0)); });
        EXPECT(w.status == 0 && file_exists(path), "writing the stale file failed: %s", w.err.c_str());

        std::vector<RankSpec> specs = make_world(4);
        specs[0].delay_ms = 400;
        BootstrapOptions o = tcp_options(0);
        o.id_file = path;
        // in file mode rank 0's callback sees only its own record
        std::vector<uint8_t> expected = describe({specs[0].rec}, 1000);
        expect_all_ok("file rendezvous", run_world(specs, o, expected, describing(1000)));
        EXPECT(file_exists(path), "rank 0 left no file");
        DIR* d = opendir(".");  // no temporary file left behind
        CHECK(d, "cannot list the work directory");
        while (dirent* ent = readdir(d))
            EXPECT(std::string(ent->d_name).rfind(path + ".tmp", 0) != 0, "left behind: %s", ent->d_name);
        closedir(d);
    }
    {  // only another job's file: the error says so
        BootstrapOptions o = tcp_options(0, 0.5);
        o.id_file = path;
        o.job_tag = "ZERO_JOB_ID=new";
        std::vector<RankSpec> specs = make_world(4);
        ChildResult r = run_child([&] { return rank_main(specs[2], o, {}, describing(0)); });
        expect_fail("file from another job", r, "found only a file from another job there");
    }
    unlink(path.c_str());
    {  // no rank 0 at all
        BootstrapOptions o = tcp_options(0, 0.5);
        o.id_file = path;
        std::vector<RankSpec> specs = make_world(2);
        ChildResult r = run_child([&] { return rank_main(specs[1], o, {}, describing(0)); });
        expect_fail("file timeout", r, "rank 1 waited 0.5 s for rank 0 to write " + path + " (ZERO_NCCL_ID_FILE)");
    }
    {  // rank 0 cannot write there
        BootstrapOptions o = tcp_options(0);
        o.id_file = "no_such_dir_" + std::to_string(getpid()) + "/id.bin";
        std::vector<RankSpec> specs = make_world(2);
        ChildResult r = run_child([&] { return rank_main(specs[0], o, {}, describing(0)); });
        expect_fail("file not writable", r, "rank 0 cannot create");
    }
}

// ----------------------------------------------------------------------------
// options and validation

void test_options() {
    ChildResult r = run_child([] {
        BootstrapOptions o = bootstrap_options_from_env();
        bool ok = o.master_addr == "127.0.0.1" && o.master_port == 29500 && o.timeout_s == 300.0 &&
                  o.id_file.empty() && o.job_tag.empty();
        setenv("MASTER_ADDR", "gpu-node-7", 1);
        setenv("MASTER_PORT", "1234", 1);
        setenv("ZERO_BOOTSTRAP_TIMEOUT", "2.5", 1);
        setenv("ZERO_NCCL_ID_FILE", "/shared/id", 1);
        setenv("SLURM_JOB_ID", "777", 1);
        BootstrapOptions p = bootstrap_options_from_env();
        ok = ok && p.master_addr == "gpu-node-7" && p.master_port == 1234 && p.timeout_s == 2.5 &&
             p.id_file == "/shared/id" && p.job_tag == "SLURM_JOB_ID=777";
        setenv("ZERO_JOB_ID", "mine", 1);
        ok = ok && bootstrap_options_from_env().job_tag == "ZERO_JOB_ID=mine";
        if (!ok) fprintf(stderr, "options from the environment are wrong\n");
        return ok ? 0 : 2;
    });
    EXPECT(r.status == 0, "bootstrap_options_from_env: %s", r.err.c_str());

    struct Bad {
        const char *var, *value, *message;
    };
    const Bad bad[] = {
        {"MASTER_PORT", "12x", "MASTER_PORT=12x is not a TCP port (1..65535)"},
        {"MASTER_PORT", "0", "MASTER_PORT=0 is not a TCP port"},
        {"MASTER_PORT", "70000", "MASTER_PORT=70000 is not a TCP port"},
        {"MASTER_PORT", "", "MASTER_PORT= is not a TCP port"},
        {"ZERO_BOOTSTRAP_TIMEOUT", "-1", "ZERO_BOOTSTRAP_TIMEOUT=-1 is not a positive number of seconds"},
        {"ZERO_BOOTSTRAP_TIMEOUT", "soon", "ZERO_BOOTSTRAP_TIMEOUT=soon is not a positive number"},
        {"ZERO_BOOTSTRAP_TIMEOUT", "inf", "ZERO_BOOTSTRAP_TIMEOUT=inf is not a positive number"},
        {"MASTER_ADDR", "", "MASTER_ADDR is set but empty"},
    };
    for (const Bad& b : bad) {
        ChildResult c = run_child([&] {
            setenv(b.var, b.value, 1);
            bootstrap_options_from_env();
            return 0;
        });
        std::string what = std::string(b.var) + "=" + b.value;
        expect_fail(what.c_str(), c, b.message);
    }
}

void test_validate() {
    auto rec = [](int rank, int world, const char* host, const char* gpu) {
        BootstrapRecord r;
        r.rank = rank, r.world = world, r.host = host, r.gpu = gpu;
        return r;
    };
    EXPECT(bootstrap_validate({rec(1, 2, "a", "x"), rec(0, 2, "a", "y")}, 2).empty(), "a good world is refused");
    EXPECT(bootstrap_validate({rec(0, 1, "a", "")}, 1).empty(), "a world of one is refused");
    std::string e = bootstrap_validate({rec(0, 3, "a", "x"), rec(2, 3, "a", "y")}, 3);
    EXPECT(e == "rank(s) 1 of 3 are missing", "missing rank: %s", e.c_str());
    EXPECT(bootstrap_validate({rec(0, 3, "a", "x"), rec(2, 3, "a", "y")}, 3, false).empty(), "a partial set is refused");
    e = bootstrap_validate({rec(0, 2, "a", ""), rec(1, 2, "a", "")}, 2);
    EXPECT(e.empty(), "empty bus ids must not count as the same GPU: %s", e.c_str());
    e = bootstrap_validate({rec(3, 4, "b", "G"), rec(0, 4, "a", "g"), rec(1, 4, "b", "g"), rec(2, 4, "a", "G")}, 4);
    EXPECT(e.find("ranks 0 and 2 both use GPU g on host a") == 0, "the lowest pair is named: %s", e.c_str());
    e = bootstrap_validate({rec(0, 2, "a", "x"), rec(5, 2, "a", "y")}, 2);
    EXPECT(e.find("reports rank 5, but the world has only ranks 0..1") != std::string::npos, "rank range: %s",
           e.c_str());
}

// ----------------------------------------------------------------------------
// detect_launch_env

struct EnvCase {
    const char* name;
    std::vector<std::pair<const char*, const char*>> vars;
    int world, rank, local;
    const char* source;
};

void test_launcher() {
    const EnvCase good[] = {
        {"none", {}, 1, 0, 0, "none"},
        {"OpenMPI",
         {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
         8, 3, 1, "OpenMPI"},
        {"Slurm", {{"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "6"}, {"SLURM_LOCALID", "2"}}, 6, 5, 2, "Slurm"},
        {"Slurm batch script (one process)", {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}, 1, 0, 0, "none"},
        {"RANK/WORLD_SIZE", {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}, 4, 2, 0, "RANK/WORLD_SIZE"},
        {"no local rank", {{"RANK", "3"}, {"WORLD_SIZE", "4"}}, 4, 3, 3, "RANK/WORLD_SIZE"},
        {"OpenMPI before the rest",
         {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "7"},
          {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "9"}},
         2, 1, 1, "OpenMPI"},
        {"empty values are unset", {{"WORLD_SIZE", ""}, {"RANK", ""}}, 1, 0, 0, "none"},
    };
    for (const EnvCase& c : good) {
        ChildResult r = run_child([&] {
            for (auto& kv : c.vars) setenv(kv.first, kv.second, 1);
            LaunchEnv e = detect_launch_env();
            if (e.world != c.world || e.rank != c.rank || e.local_rank != c.local || e.source != c.source) {
                fprintf(stderr, "got world %d rank %d local %d source %s\n", e.world, e.rank, e.local_rank,
                        e.source.c_str());
                return 2;
            }
            return 0;
        });
        EXPECT(r.status == 0, "launcher case '%s': %s", c.name, r.err.c_str());
    }

    struct BadCase {
        std::vector<std::pair<const char*, const char*>> vars;
        const char* message;
    };
    const BadCase bad[] = {
        {{{"WORLD_SIZE", "abc"}, {"RANK", "0"}}, "environment variable WORLD_SIZE=abc is not a valid count"},
        {{{"WORLD_SIZE", "4"}, {"RANK", "-1"}}, "environment variable RANK=-1 is not a valid count"},
        {{{"WORLD_SIZE", "4"}, {"RANK", "4"}}, "RANK=4 is not below WORLD_SIZE=4"},
        {{{"WORLD_SIZE", "0"}, {"RANK", "0"}}, "RANK=0 is not below WORLD_SIZE=0"},
        {{{"WORLD_SIZE", "2"}}, "WORLD_SIZE is set but RANK is not"},
        {{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1x"}},
         "environment variable OMPI_COMM_WORLD_RANK=1x is not a valid count"},
        {{{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "one"}},
         "environment variable SLURM_LOCALID=one is not a valid count"},
        {{{"SLURM_STEP_NUM_TASKS", "99999999999"}, {"SLURM_PROCID", "1"}},
         "environment variable SLURM_STEP_NUM_TASKS=99999999999 is not a valid count"},
    };
    for (const BadCase& b : bad) {
        ChildResult r = run_child([&] {
            for (auto& kv : b.vars) setenv(kv.first, kv.second, 1);
            detect_launch_env();
            return 0;
        });
        expect_fail(b.message, r, b.message);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string which = argc > 1 ? argv[1] : "all";
    if (which == "bootstrap" || which == "all") {
        test_validate();
        test_options();
        test_tcp_worlds();
        test_tcp_errors();
        test_tcp_strays();
        test_from_env();
        test_file();
    }
    if (which == "launcher" || which == "all") test_launcher();
    return test_summary(("test_bootstrap " + which).c_str());
}

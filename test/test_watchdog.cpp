// Hangs end with a line naming who waited for whom: the emulated backend's
// barrier watchdog. Three ranks as threads; two enter a collective, the third
// is stuck elsewhere. With a 1 s limit the process ends within seconds, exit 1,
// with one line naming a waiting rank, the collective, and the missing rank.
// Without a limit nothing fires while a slow rank is merely slow. The same for
// point-to-point: a receive whose peer never sends names the peer, and so does
// a send whose peer never receives.
// (The rendezvous' timeout, naming ranks that never connected, is in test_bootstrap.)
#include <chrono>
#include <string>
#include <thread>

#include "test/child_process.h"
#include "test/test_util.h"
#include "zero/comm/comm_emulated.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// ranks 0 and 1 call `op`; rank `stuck` sleeps `stuck_s` first, then joins
void world_with_a_late_rank(const char* op, int stuck, double stuck_s, double timeout_s) {
    run_emulated_ranks(3, [&](int rank, EmulatedWorld& world) {
        KernelCtx ctx;
        EmulatedComm comm(world, rank, ctx);
        if (rank == stuck) std::this_thread::sleep_for(std::chrono::duration<double>(stuck_s));
        std::vector<float> send(4, (float)rank), recv(12);
        if (std::string(op) == "all_gather") comm.all_gather(send.data(), recv.data(), 4, DType::F32, nullptr);
        else if (std::string(op) == "barrier") comm.barrier();
        else if (std::string(op) == "receive") {  // from the stuck rank, which then sends late
            if (rank == (stuck + 1) % 3) comm.recv(recv.data(), 16, stuck, nullptr);
            if (rank == stuck) comm.send(send.data(), 16, (stuck + 1) % 3, nullptr);
        } else if (std::string(op) == "send") {  // to the stuck rank, which then receives late
            if (rank == (stuck + 1) % 3) comm.send(send.data(), 16, stuck, nullptr);
            if (rank == stuck) comm.recv(recv.data(), 16, (stuck + 1) % 3, nullptr);
        }
        else comm.sum_scalar(rank);
    }, timeout_s);
}

void expect_watchdog(const char* op, const char* what, int stuck) {
    auto t0 = std::chrono::steady_clock::now();
    ChildResult r = run_in_child([&] { world_with_a_late_rank(op, stuck, 30.0, 1.0); });
    double took = seconds_since(t0);
    std::string want = std::string("waited 1 s in ") + what + " for rank(s) " + std::to_string(stuck) + ", which never arrived";
    if (std::string(op) == "receive" || std::string(op) == "send")
        want = std::string("waited 1 s to ") + op + " 16 bytes " + (op[0] == 'r' ? "from" : "to") + " rank " +
               std::to_string(stuck) + " of its group";
    EXPECT(r.status == 1 && r.err.rfind("error: rank ", 0) == 0 && r.err.find(want) != std::string::npos &&
               std::count(r.err.begin(), r.err.end(), '\n') == 1,
           "%s: expected one line with '%s', got status %d: %s", op, want.c_str(), r.status, r.err.c_str());
    EXPECT(took < 10.0, "%s: the watchdog took %.1f s for a 1 s limit", op, took);
}

}  // namespace

int main() {
    expect_watchdog("all_gather", "all_gather", 2);
    expect_watchdog("barrier", "barrier", 0);
    expect_watchdog("scalar", "a scalar reduction", 1);
    expect_watchdog("receive", "", 0);
    expect_watchdog("send", "", 2);
    // a rank late by less than the limit is fine
    ChildResult slow = run_in_child([] { world_with_a_late_rank("all_gather", 2, 0.3, 5.0); });
    EXPECT(slow.status == 0 && slow.err.empty(), "a slow rank within the limit: status %d: %s", slow.status,
           slow.err.c_str());
    return test_summary("watchdog");
}

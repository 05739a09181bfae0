// The rendezvous of a multi-process job: before NCCL can connect the ranks,
// every rank must learn one value that rank 0 makes (NCCL's 128-byte unique id),
// and rank 0 can check that the job makes sense. Host-only, POSIX sockets, no
// CUDA, no MPI.
//
// Every rank calls rendezvous() once with its own BootstrapRecord (rank, world
// size, hostname, GPU PCI bus id). On rank 0 the callback runs once, with every
// rank's record sorted by rank, and what it returns is handed to every rank --
// rank 0 included -- as the result. Any problem ends every process that can be
// reached with the same one-line error (fail(): "error: ...", exit code 1), so a
// job never half-starts. The callback may throw std::exception to fail the job
// with its message on every rank.
//
// Environment (bootstrap_options_from_env)
//
//   MASTER_ADDR              rank 0's host name or address        [127.0.0.1]
//   MASTER_PORT              the TCP port rank 0 listens on      [29500]
//   ZERO_BOOTSTRAP_TIMEOUT   seconds to wait for the others      [300]
//   ZERO_NCCL_ID_FILE        rendezvous through this file instead of TCP
//   ZERO_JOB_ID              names the job (default: SLURM_JOB_ID,
//                            PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid or
//                            TORCHELASTIC_RUN_ID, whichever is set first)
//
// TCP protocol (the default)
//
//   Rank 0 listens on MASTER_ADDR:MASTER_PORT (on that address if it is a
//   loopback address, otherwise on every interface). Every other rank connects,
//   retrying while rank 0 is not up yet (connection refused, unreachable, name
//   not resolvable yet) until the timeout, then sends one fixed-size record:
//
//     record (512 bytes)   "ZRDVREC1" | rank u32 | world u32 | host[256] |
//                          gpu[128] | job[112]
//
//   (integers big-endian, strings NUL-padded and truncated to fit.) Rank 0 reads
//   records from all connections at once (poll), until it holds world-1 of them
//   or the timeout passes. A connection that does not send a record with the
//   right magic is dropped; one whose job tag differs from rank 0's is told so
//   and dropped (another job that picked the same port). Then rank 0 validates
//   all the records: every rank in [0, world) exactly once, the same world size
//   everywhere, and no two ranks on one host with the same GPU bus id (NCCL
//   cannot drive one GPU from two ranks). If they pass it runs the callback.
//   Either way it answers every connection with
//
//     reply                "ZRDVRPL1" | status u32 (0 ok, 1 error) | length u32 |
//                          length bytes: the payload, or the error message
//
//   and closes. A rank that gets an error reply fails with that message, so all
//   ranks print the same line. A rank 0 that times out sends the connected
//   ranks the list of ranks that never came; a rank that never reaches rank 0
//   says "rank 3 could not reach rank 0 at host:port within 300 s".
//
// File protocol (ZERO_NCCL_ID_FILE set: a path on a filesystem all ranks share)
//
//   Rank 0 removes any old file, runs the callback with its own record only,
//   and writes "ZRDVFIL1" | world u32 | length u32 | job[112] | payload to a
//   temporary file that it renames into place (atomic: readers never see half a
//   file). The others poll for the file until the timeout, skipping a file left
//   by another job (different world size or job tag). Rank 0 never sees the
//   other ranks' records here, so the checks above (two ranks on one GPU in
//   particular) cannot run before NCCL; NCCL's own init then reports such
//   problems. Use a path unique to the job (e.g. one containing $SLURM_JOB_ID):
//   without a job tag, a rank that looks before rank 0 has removed a previous
//   run's file cannot tell it is stale.
//
// The definitions are in zero/comm/bootstrap.cpp (the checks, the options,
// rendezvous()), zero/comm/bootstrap_tcp.cpp (the TCP protocol) and
// zero/comm/bootstrap_file.cpp (the file protocol); zero/comm/bootstrap_detail.h
// holds what they share.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zero/comm/launcher.h"

// What each rank tells rank 0 about itself.
struct BootstrapRecord {
    int rank = 0, world = 1;
    std::string host;  // gethostname()
    std::string gpu;   // PCI bus id of the rank's GPU, e.g. "0000:1a:00.0"; empty: none
};

struct BootstrapOptions {
    std::string master_addr = "127.0.0.1";
    int master_port = 29500;
    double timeout_s = 300.0;
    std::string id_file;  // non-empty: the file rendezvous
    std::string job_tag;  // identifies the job; empty: unknown
};

using BootstrapPayloadFn = std::function<std::vector<uint8_t>(const std::vector<BootstrapRecord>&)>;

// Checks the records (any order) of a world of `world` ranks: returns "" when
// they are consistent, else the one-line reason. With complete=false, ranks may
// be missing (a partial set: what has arrived so far).
std::string bootstrap_validate(std::vector<BootstrapRecord> recs, int world, bool complete = true);

// The job's name from the launcher's environment ("" if none is known).
std::string bootstrap_job_tag();

// BootstrapOptions from the environment (see the top of this file).
BootstrapOptions bootstrap_options_from_env();

// The rendezvous (see the top of this file). `mine.rank` and `mine.world` must
// be env's; `make_payload` runs on rank 0 only.
std::vector<uint8_t> rendezvous(const LaunchEnv& env, const BootstrapRecord& mine,
                                const BootstrapPayloadFn& make_payload,
                                const BootstrapOptions& opts = bootstrap_options_from_env());

// The rendezvous of zero/comm/bootstrap.h, the part both transports share: the
// helpers of zero/comm/bootstrap_detail.h, the checks, the options, rendezvous().
#include "zero/comm/bootstrap.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/comm/bootstrap_detail.h"

namespace bootstrap_detail {

int ms_until(Clock::time_point deadline) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (ms <= 0) return 0;
    return ms > INT_MAX / 2 ? INT_MAX / 2 : (int)ms;
}
Clock::time_point after_seconds(double s) {
    return Clock::now() + std::chrono::microseconds((long long)(std::min(s, 1e9) * 1e6));
}

void put_u32(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
uint32_t get_u32(const uint8_t* p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
void put_str(uint8_t* p, size_t field, const std::string& s) {
    memset(p, 0, field);
    memcpy(p, s.data(), std::min(s.size(), field - 1));  // always NUL-terminated
}
std::string get_str(const uint8_t* p, size_t field) { return std::string((const char*)p, strnlen((const char*)p, field)); }

std::string lower(std::string s) {
    for (char& c : s) c = (char)tolower((unsigned char)c);
    return s;
}

std::string rank_list(const std::vector<int>& ranks, size_t limit) {
    std::string s;
    for (size_t i = 0; i < ranks.size() && i < limit; i++) s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > limit) s += " and " + std::to_string(ranks.size() - limit) + " more";
    return s;
}

std::vector<uint8_t> run_payload_fn(const BootstrapPayloadFn& make_payload,
                                    const std::vector<BootstrapRecord>& recs, std::string& err) {
    try {
        return make_payload(recs);
    } catch (const std::exception& e) {
        err = e.what();
        if (err.empty()) err = "rank 0 could not make the rendezvous payload";
    }
    return {};
}

}  // namespace bootstrap_detail

std::string bootstrap_validate(std::vector<BootstrapRecord> recs, int world, bool complete) {
    using bootstrap_detail::lower;
    std::sort(recs.begin(), recs.end(),
              [](const BootstrapRecord& a, const BootstrapRecord& b) { return a.rank < b.rank; });
    for (const BootstrapRecord& r : recs) {
        if (r.world != world)
            return strf("rank %d (host %s) was started as one of %d ranks, but rank 0 as one of %d: all ranks must "
                        "come from one launch with one world size",
                        r.rank, r.host.c_str(), r.world, world);
        if (r.rank < 0 || r.rank >= world)
            return strf("a process on host %s reports rank %d, but the world has only ranks 0..%d", r.host.c_str(),
                        r.rank, world - 1);
    }
    for (size_t i = 1; i < recs.size(); i++)
        if (recs[i].rank == recs[i - 1].rank)
            return strf("two processes (on hosts %s and %s) both claim rank %d: check the launcher's rank variables",
                        recs[i - 1].host.c_str(), recs[i].host.c_str(), recs[i].rank);
    if (complete) {
        std::vector<int> missing;
        for (int k = 0, i = 0; k < world; k++) {
            if (i < (int)recs.size() && recs[i].rank == k) i++;
            else missing.push_back(k);
        }
        if (!missing.empty())
            return "rank(s) " + bootstrap_detail::rank_list(missing) + " of " + std::to_string(world) + " are missing";
    }
    // two ranks on one GPU: each GPU's ranks in rank order; of the GPUs with
    // two or more, the one whose lowest rank is lowest is reported
    std::map<std::string, std::vector<const BootstrapRecord*>> by_gpu;  // "host\nbus id" -> its ranks
    for (const BootstrapRecord& r : recs)
        if (!r.gpu.empty()) by_gpu[r.host + "\n" + lower(r.gpu)].push_back(&r);
    const BootstrapRecord *first = nullptr, *second = nullptr;
    for (const auto& gpu : by_gpu)
        if (gpu.second.size() > 1 && (!first || gpu.second[0]->rank < first->rank))
            first = gpu.second[0], second = gpu.second[1];
    if (first)
        return strf("ranks %d and %d both use GPU %s on host %s: NCCL cannot run two ranks on one GPU; to emulate N "
                    "ranks on one GPU run one process with --ranks N",
                    first->rank, second->rank, lower(first->gpu).c_str(), first->host.c_str());
    return "";
}

std::string bootstrap_job_tag() {
    const char* names[] = {"ZERO_JOB_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                           "TORCHELASTIC_RUN_ID"};
    for (const char* n : names) {
        const char* v = getenv(n);
        if (v && *v) return std::string(n) + "=" + v;
    }
    return "";
}

BootstrapOptions bootstrap_options_from_env() {
    BootstrapOptions o;
    if (const char* a = getenv("MASTER_ADDR")) {
        CHECK(*a, "MASTER_ADDR is set but empty: set it to the host name or address of rank 0");
        o.master_addr = a;
    }
    if (const char* p = getenv("MASTER_PORT")) {
        char* end = nullptr;
        long v = strtol(p, &end, 10);
        CHECK(*p && *end == '\0' && v >= 1 && v <= 65535, "MASTER_PORT=%s is not a TCP port (1..65535)", p);
        o.master_port = (int)v;
    }
    if (const char* t = getenv("ZERO_BOOTSTRAP_TIMEOUT")) {
        char* end = nullptr;
        double v = strtod(t, &end);
        CHECK(*t && *end == '\0' && std::isfinite(v) && v > 0,
              "ZERO_BOOTSTRAP_TIMEOUT=%s is not a positive number of seconds", t);
        o.timeout_s = v;
    }
    if (const char* f = getenv("ZERO_NCCL_ID_FILE")) o.id_file = f;
    o.job_tag = bootstrap_job_tag();
    return o;
}

// Checks the launch, then meets the others: nobody (a world of one), through the
// file, or over TCP.
std::vector<uint8_t> rendezvous(const LaunchEnv& env, const BootstrapRecord& mine,
                                const BootstrapPayloadFn& make_payload, const BootstrapOptions& opts) {
    CHECK(mine.rank == env.rank && mine.world == env.world && env.world >= 1 && env.rank >= 0 &&
              env.rank < env.world,
          "rendezvous: record (rank %d of %d) and launch environment (rank %d of %d) disagree", mine.rank,
          mine.world, env.rank, env.world);
    CHECK(opts.timeout_s > 0, "rendezvous: the timeout must be positive");
    if (env.world == 1) {  // nobody to meet
        std::string err;
        std::vector<uint8_t> payload = bootstrap_detail::run_payload_fn(make_payload, {mine}, err);
        CHECK(err.empty(), "%s", err.c_str());
        return payload;
    }
    if (!opts.id_file.empty())
        return env.rank == 0 ? bootstrap_detail::file_publish(mine, make_payload, opts)
                             : bootstrap_detail::file_wait(mine, opts);
    return env.rank == 0 ? bootstrap_detail::serve(mine, make_payload, opts) : bootstrap_detail::join(mine, opts);
}

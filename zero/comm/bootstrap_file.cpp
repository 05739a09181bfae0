// The rendezvous through a shared file (ZERO_NCCL_ID_FILE; zero/comm/bootstrap.h
// describes the protocol): rank 0's file_publish() and the others' file_wait().
#include "zero/comm/bootstrap.h"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "zero/base/common.h"
#include "zero/comm/bootstrap_detail.h"

namespace bootstrap_detail {

std::vector<uint8_t> file_publish(const BootstrapRecord& mine, const BootstrapPayloadFn& make_payload,
                                  const BootstrapOptions& o) {
    const std::string& path = o.id_file;
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
        fail("rank 0 cannot remove the old %s (ZERO_NCCL_ID_FILE): %s", path.c_str(), strerror(errno));
    std::string err;
    std::vector<uint8_t> payload = run_payload_fn(make_payload, {mine}, err);
    CHECK(err.empty(), "%s", err.c_str());
    CHECK(payload.size() <= MAX_REPLY_BYTES, "the rendezvous payload is too large");
    std::vector<uint8_t> data(16 + JOB_BYTES);
    memcpy(data.data(), FILE_MAGIC, 8);
    put_u32(&data[8], (uint32_t)mine.world);
    put_u32(&data[12], (uint32_t)payload.size());
    put_str(&data[16], JOB_BYTES, o.job_tag);
    data.insert(data.end(), payload.begin(), payload.end());
    // temp (named by pid, so nothing else writes it) + fsync + rename: readers see
    // either no file or the whole file
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = fopen(tmp.c_str(), "wb");
    CHECK(f, "rank 0 cannot create %s (next to ZERO_NCCL_ID_FILE): %s", tmp.c_str(), strerror(errno));
    bool ok = fwrite(data.data(), 1, data.size(), f) == data.size() && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    fclose(f);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) e = errno;
        unlink(tmp.c_str());
        fail("rank 0 cannot write %s (ZERO_NCCL_ID_FILE): %s", path.c_str(), strerror(e));
    }
    return payload;
}

// Reads the id file if it is there and is this job's: 1 = got it, 0 = not (yet),
// -1 = there but another job's (`why` says whose).
int file_try_read(const BootstrapRecord& mine, const BootstrapOptions& o, std::vector<uint8_t>& payload,
                  std::string& why) {
    FILE* f = fopen(o.id_file.c_str(), "rb");
    if (!f) return 0;
    std::vector<uint8_t> head(16 + JOB_BYTES);
    int result = 0;
    if (fread(head.data(), 1, head.size(), f) == head.size() && memcmp(head.data(), FILE_MAGIC, 8) == 0) {
        uint32_t world = get_u32(&head[8]), len = get_u32(&head[12]);
        std::string job = get_str(&head[16], JOB_BYTES);
        if ((int)world != mine.world || job != o.job_tag) {
            why = "world size " + std::to_string(world) + ", " + (job.empty() ? "no job id" : job);
            result = -1;
        } else if (len <= MAX_REPLY_BYTES) {
            payload.resize(len);
            if (fread(payload.data(), 1, len, f) == len) result = 1;
        }
    } else {
        why = "not a rendezvous file";
        result = -1;
    }
    fclose(f);
    return result;
}

std::vector<uint8_t> file_wait(const BootstrapRecord& mine, const BootstrapOptions& o) {
    const auto deadline = after_seconds(o.timeout_s);
    std::string stale;
    for (;;) {
        std::vector<uint8_t> payload;
        std::string why;
        int r = file_try_read(mine, o, payload, why);
        if (r == 1) return payload;
        if (r < 0) stale = why;
        if (Clock::now() >= deadline)
            fail("rank %d waited %g s for rank 0 to write %s (ZERO_NCCL_ID_FILE)%s: is rank 0 running, and is that "
                 "path on a filesystem all ranks share?",
                 mine.rank, o.timeout_s, o.id_file.c_str(),
                 stale.empty() ? "" : (", but found only a file from another job there (" + stale + ")").c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, std::max(ms_until(deadline), 1))));
    }
}

}  // namespace bootstrap_detail

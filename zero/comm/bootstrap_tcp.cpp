// The rendezvous over TCP (zero/comm/bootstrap.h describes the protocol): the
// wire's record and reply, sockets with deadlines, rank 0's serve() and the others' join().
#include "zero/comm/bootstrap.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "zero/base/common.h"
#include "zero/comm/bootstrap_detail.h"

namespace bootstrap_detail {

std::vector<uint8_t> encode_record(const BootstrapRecord& r, const std::string& job) {
    std::vector<uint8_t> b(RECORD_BYTES, 0);
    memcpy(b.data(), RECORD_MAGIC, 8);
    put_u32(&b[8], (uint32_t)r.rank);
    put_u32(&b[12], (uint32_t)r.world);
    put_str(&b[16], HOST_BYTES, r.host);
    put_str(&b[16 + HOST_BYTES], GPU_BYTES, r.gpu);
    put_str(&b[16 + HOST_BYTES + GPU_BYTES], JOB_BYTES, job);
    return b;
}
// false if `b` is not a record (a stray connection)
bool decode_record(const uint8_t* b, BootstrapRecord& r, std::string& job) {
    if (memcmp(b, RECORD_MAGIC, 8) != 0) return false;
    uint32_t rank = get_u32(b + 8), world = get_u32(b + 12);
    if (rank > (uint32_t)INT_MAX || world > (uint32_t)INT_MAX) return false;
    r.rank = (int)rank;
    r.world = (int)world;
    r.host = get_str(b + 16, HOST_BYTES);
    r.gpu = get_str(b + 16 + HOST_BYTES, GPU_BYTES);
    job = get_str(b + 16 + HOST_BYTES + GPU_BYTES, JOB_BYTES);
    return true;
}

std::string endpoint(const BootstrapOptions& o) {
    bool v6 = o.master_addr.find(':') != std::string::npos;
    return (v6 ? "[" + o.master_addr + "]" : o.master_addr) + ":" + std::to_string(o.master_port);
}

// A file descriptor that closes itself.
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }  // (and so not copyable)
    Fd& operator=(Fd&& o) noexcept {
        reset();
        std::swap(fd, o.fd);
        return *this;
    }
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) close(fd);
        fd = -1;
    }
};

// Waits until `fd` is ready for `events`; false on timeout. Restarts after signals.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        int n = poll(&p, 1, ms_until(deadline));
        if (n > 0) return true;  // ready, or an error the next call will report
        if (n == 0) return false;
        if (errno != EINTR) return true;
    }
}

// Sends, or receives, exactly `n` bytes (non-blocking socket) or returns false
// with the reason ("connection closed" when the peer closed first).
bool transfer_all(int fd, bool sending, uint8_t* p, size_t n, Clock::time_point deadline, std::string& err) {
    while (n > 0) {
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k == 0) {
            return err = sending ? "send returned 0" : "connection closed", false;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline))
                return err = sending ? "timed out sending" : "timed out", false;
        } else {
            return err = strerror(errno), false;
        }
    }
    return true;
}

std::vector<uint8_t> encode_reply(bool ok, const void* data, size_t n) {
    std::vector<uint8_t> b(REPLY_HEADER_BYTES + n);
    memcpy(b.data(), REPLY_MAGIC, 8);
    put_u32(&b[8], ok ? 0u : 1u);
    put_u32(&b[12], (uint32_t)n);
    if (n) memcpy(&b[REPLY_HEADER_BYTES], data, n);
    return b;
}

// getaddrinfo for a TCP endpoint; nullptr with `err` set on failure.
addrinfo* resolve(const std::string& host, int port, std::string& err) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
        err = std::string("cannot resolve ") + host + ": " + (rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return nullptr;
    }
    return res;
}

bool is_loopback(const sockaddr* sa) {
    if (sa->sa_family == AF_INET) return (ntohl(((const sockaddr_in*)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((const sockaddr_in6*)sa)->sin6_addr);
    return false;
}

// ---------------------------------------------------------------------------
// rank 0 over TCP

// Listens on the master address (a loopback address as it is, anything else as
// the wildcard address of its family, since MASTER_ADDR often names this host by
// an address other interfaces also answer to).
Fd listen_master(const BootstrapOptions& o) {
    std::string err;
    addrinfo* res = resolve(o.master_addr, o.master_port, err);
    CHECK(res, "rank 0 cannot listen on %s: %s (check MASTER_ADDR)", endpoint(o).c_str(), err.c_str());
    sockaddr_storage addr{};
    socklen_t len = (socklen_t)res->ai_addrlen;
    memcpy(&addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (!is_loopback((sockaddr*)&addr)) {
        if (addr.ss_family == AF_INET) ((sockaddr_in*)&addr)->sin_addr.s_addr = htonl(INADDR_ANY);
        else if (addr.ss_family == AF_INET6) ((sockaddr_in6*)&addr)->sin6_addr = in6addr_any;
    }
    Fd s(socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));  // (accepts never block)
    CHECK(s.fd >= 0, "rank 0 cannot create a socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.fd, (sockaddr*)&addr, len) != 0) {
        int e = errno;
        fail("rank 0 cannot listen on %s: %s%s", endpoint(o).c_str(), strerror(e),
             e == EADDRINUSE ? " (another job on this host may be using the port: set MASTER_PORT)"
             : e == EADDRNOTAVAIL ? " (MASTER_ADDR must name the host of rank 0)"
                                  : "");
    }
    CHECK(listen(s.fd, 1024) == 0, "rank 0 cannot listen on %s: %s", endpoint(o).c_str(), strerror(errno));
    return s;
}

struct Conn {
    Fd fd;
    std::vector<uint8_t> buf = std::vector<uint8_t>(RECORD_BYTES);
    size_t got = 0;
    BootstrapRecord rec;
};

// Rank 0: gathers the other ranks' records, validates, answers every rank.
std::vector<uint8_t> serve(const BootstrapRecord& mine, const BootstrapPayloadFn& make_payload,
                           const BootstrapOptions& o) {
    const int world = mine.world;
    Fd listener = listen_master(o);
    const auto start = Clock::now();
    auto deadline = after_seconds(o.timeout_s);
    auto next_note = Clock::now() + std::chrono::seconds(60);
    std::vector<Conn> pending, arrived;
    // what has arrived, for the checks as records come in
    std::vector<int> owner(world, -1);  // rank -> index into arrived (-2: rank 0 itself)
    owner[0] = -2;
    std::set<std::string> gpus;  // "host\nbus id" of every rank so far
    if (!mine.gpu.empty()) gpus.insert(mine.host + "\n" + lower(mine.gpu));
    bool invalid = false;

    auto missing_ranks = [&]() {
        std::vector<int> m;
        for (int k = 0; k < world; k++)
            if (owner[k] == -1) m.push_back(k);
        return m;
    };
    // a record that makes the job impossible whatever else arrives: wait only a
    // short grace for the rest, so that most ranks hear why before we fail
    auto check_arrival = [&](const BootstrapRecord& r) {
        bool bad = r.world != world || r.rank < 0 || r.rank >= world || owner[r.rank] != -1;
        if (!bad && !r.gpu.empty()) bad = !gpus.insert(r.host + "\n" + lower(r.gpu)).second;
        if (!bad) owner[r.rank] = (int)arrived.size();
        if (bad && !invalid) {
            invalid = true;
            deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
        }
    };

    while ((int)arrived.size() < world - 1 && Clock::now() < deadline) {
        if (Clock::now() >= next_note) {
            fprintf(stderr, "note: rank 0 is waiting at %s for rank(s) %s of %d\n", endpoint(o).c_str(),
                    rank_list(missing_ranks()).c_str(), world);
            next_note = Clock::now() + std::chrono::seconds(60);
        }
        std::vector<pollfd> fds;
        fds.push_back({listener.fd, POLLIN, 0});
        for (const Conn& c : pending) fds.push_back({c.fd.fd, POLLIN, 0});
        int wait_ms = std::min(ms_until(deadline), ms_until(next_note));
        int n = poll(fds.data(), fds.size(), std::max(wait_ms, 1));
        if (n < 0) {
            CHECK(errno == EINTR, "rank 0: poll failed: %s", strerror(errno));
            continue;
        }
        // read what has come in (before accepting: `fds` indexes `pending`)
        std::vector<Conn> still;
        for (size_t i = 0; i < pending.size(); i++) {
            Conn& c = pending[i];
            bool drop = false;
            if (fds[i + 1].revents) {
                ssize_t k = recv(c.fd.fd, c.buf.data() + c.got, RECORD_BYTES - c.got, 0);
                if (k > 0) c.got += (size_t)k;
                else if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) drop = true;
            }
            if (!drop && c.got == RECORD_BYTES) {
                std::string job;
                if (!decode_record(c.buf.data(), c.rec, job)) {
                    drop = true;  // not one of ours
                } else if (job != o.job_tag) {
                    // another job's rank found our port: tell it, and keep waiting for ours
                    std::string m = "rank 0 at " + endpoint(o) + " belongs to another job (" +
                                    (o.job_tag.empty() ? "no job id" : o.job_tag) + "; yours: " +
                                    (job.empty() ? "no job id" : job) + "): give each job its own MASTER_PORT";
                    std::vector<uint8_t> r = encode_reply(false, m.data(), m.size());
                    std::string ignored;
                    transfer_all(c.fd.fd, true, r.data(), r.size(), after_seconds(1.0), ignored);
                    drop = true;
                } else {
                    check_arrival(c.rec);
                    arrived.push_back(std::move(c));
                    continue;
                }
            }
            if (!drop) still.push_back(std::move(c));
        }
        pending = std::move(still);
        if (fds[0].revents)  // accept until accept4 fails (EAGAIN: no more; anything else: that client's problem)
            for (int fd; (fd = accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;)
                pending.push_back(Conn{Fd(fd)});
    }
    const bool timed_out = (int)arrived.size() < world - 1;
    listener.reset();  // later connections are refused: nobody is waiting for them any more
    pending.clear();

    std::vector<BootstrapRecord> recs{mine};
    for (const Conn& c : arrived) recs.push_back(c.rec);
    std::string error = bootstrap_validate(recs, world, /*complete=*/false);
    if (error.empty() && timed_out) {
        double waited = std::chrono::duration<double>(Clock::now() - start).count();
        error = strf("rank 0 waited %.0f s at %s, but rank(s) %s of %d never connected: were all %d processes "
                     "started, with the same MASTER_ADDR and MASTER_PORT? (ZERO_BOOTSTRAP_TIMEOUT sets the wait)",
                     waited, endpoint(o).c_str(), rank_list(missing_ranks()).c_str(), world, world);
    }
    if (error.empty()) error = bootstrap_validate(recs, world, /*complete=*/true);
    std::vector<uint8_t> payload;
    if (error.empty()) {
        std::sort(recs.begin(), recs.end(),
                  [](const BootstrapRecord& a, const BootstrapRecord& b) { return a.rank < b.rank; });
        payload = run_payload_fn(make_payload, recs, error);
        if (error.empty() && payload.size() > MAX_REPLY_BYTES) error = "the rendezvous payload is too large";
    }
    std::vector<uint8_t> reply = error.empty() ? encode_reply(true, payload.data(), payload.size())
                                               : encode_reply(false, error.data(), error.size());
    const auto send_deadline = after_seconds(30.0);
    for (Conn& c : arrived) {
        std::string err;
        bool sent = transfer_all(c.fd.fd, true, reply.data(), reply.size(), send_deadline, err);
        if (sent) shutdown(c.fd.fd, SHUT_WR);
        // a good reply must reach every rank, or the others would wait in NCCL for
        // a rank that is gone; after an error reply we fail anyway
        if (!sent && error.empty())
            fail("rank 0 could not send the rendezvous reply to rank %d on host %s: %s", c.rec.rank,
                 c.rec.host.c_str(), err.c_str());
    }
    arrived.clear();
    if (!error.empty()) fail("%s", error.c_str());
    return payload;
}

// A non-zero rank over TCP: connect (retrying), send the record, await the reply.
std::vector<uint8_t> join(const BootstrapRecord& mine, const BootstrapOptions& o) {
    const auto deadline = after_seconds(o.timeout_s);
    std::string last_err = "no attempt made";
    Fd s;
    int backoff_ms = 20;
    for (;;) {
        addrinfo* res = resolve(o.master_addr, o.master_port, last_err);
        for (addrinfo* a = res; a && s.fd < 0; a = a->ai_next) {
            Fd c(socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
            if (c.fd < 0) {
                last_err = strerror(errno);
                continue;
            }
            int rc;
            do rc = connect(c.fd, a->ai_addr, a->ai_addrlen);
            while (rc != 0 && errno == EINTR);
            if (rc != 0 && errno == EINPROGRESS) {
                auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(5));
                if (!wait_fd(c.fd, POLLOUT, attempt)) {
                    last_err = "connection attempt timed out";
                    continue;
                }
                int soerr = 0;
                socklen_t len = sizeof(soerr);
                getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
                rc = soerr == 0 ? 0 : -1;
                errno = soerr;
            }
            if (rc == 0) s = std::move(c);
            else last_err = strerror(errno);
        }
        if (res) freeaddrinfo(res);
        if (s.fd >= 0) break;
        if (Clock::now() >= deadline)
            fail("rank %d could not reach rank 0 at %s within %g s (%s): is rank 0 running, and do all ranks have "
                 "the same MASTER_ADDR and MASTER_PORT? (ZERO_BOOTSTRAP_TIMEOUT sets the wait)",
                 mine.rank, endpoint(o).c_str(), o.timeout_s, last_err.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, std::max(ms_until(deadline), 1))));
        backoff_ms = std::min(backoff_ms * 2, 500);
    }

    std::vector<uint8_t> rec = encode_record(mine, o.job_tag);
    std::string err;
    CHECK(transfer_all(s.fd, true, rec.data(), rec.size(), after_seconds(o.timeout_s), err),
          "rank %d could not send its record to rank 0 at %s: %s", mine.rank, endpoint(o).c_str(), err.c_str());
    // rank 0 answers by its own deadline, which began before we could connect
    uint8_t header[REPLY_HEADER_BYTES];
    if (!transfer_all(s.fd, false, header, sizeof(header), after_seconds(o.timeout_s + 30.0), err))
        fail("rank %d got no rendezvous reply from rank 0 at %s (%s): rank 0 has probably failed; see its error",
             mine.rank, endpoint(o).c_str(), err.c_str());
    CHECK(memcmp(header, REPLY_MAGIC, 8) == 0,
          "rank %d: what answers at %s is not rank 0 of this job (is another program using MASTER_PORT?)", mine.rank,
          endpoint(o).c_str());
    uint32_t status = get_u32(header + 8), len = get_u32(header + 12);
    CHECK(status <= 1 && len <= MAX_REPLY_BYTES, "rank %d: malformed rendezvous reply from %s", mine.rank,
          endpoint(o).c_str());
    std::vector<uint8_t> body(len);
    if (len && !transfer_all(s.fd, false, body.data(), len, after_seconds(30.0), err))
        fail("rank %d: the rendezvous reply from rank 0 at %s was cut off (%s)", mine.rank, endpoint(o).c_str(),
             err.c_str());
    if (status != 0) fail("%.*s", (int)body.size(), (const char*)body.data());
    return body;
}

}  // namespace bootstrap_detail

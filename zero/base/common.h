// Small utilities shared by every part of the trainer: one-line fatal errors,
// a host wall clock, checked file I/O and atomic file replacement.
//
// Errors are user-facing: a single line on stderr that says what was wrong and
// where, then exit code 1. No stack traces, no abort(). The emulated backend runs
// ranks as threads; fail() ends the whole process, which is what a real
// multi-process job does too when one rank dies.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef ZERO_FAIL_THROWS
// Fuzzing builds (test/fuzz/): a refusal is an exception the harness catches,
// so one process can try millions of inputs; the product always exits.
#include <stdexcept>
struct Refusal : std::runtime_error {
    using std::runtime_error::runtime_error;
};
#endif

[[noreturn]] inline void fail(const char* fmt, ...) {
    std::va_list args;
    va_start(args, fmt);
    char msg[2048];
    vsnprintf(msg, sizeof(msg), fmt, args);
    va_end(args);
#ifdef ZERO_FAIL_THROWS
    throw Refusal(msg);
#endif
    // one line per process: when several rank threads fail at once (a watchdog
    // firing on every waiting rank), the first prints and ends the process
    static std::atomic<bool> failing{false};
    if (failing.exchange(true))
        for (;;) pause();
    fflush(stdout);
    fprintf(stderr, "error: %s\n", msg);
    fflush(nullptr);
    // _Exit rather than exit: other rank threads may still be running and must not
    // see static destructors run underneath them.
    std::_Exit(1);
}

#define CHECK(cond, ...)                 \
    do {                                 \
        if (!(cond)) fail(__VA_ARGS__);  \
    } while (0)

// Host wall time since the clock started or since its last lap.
struct HostClock {
    std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); }
    double lap() {  // milliseconds, and start again
        auto now = std::chrono::steady_clock::now();
        double ms = std::chrono::duration<double, std::milli>(now - t).count();
        t = now;
        return ms;
    }
};

// printf into a std::string, of any length
__attribute__((format(printf, 1, 2))) inline std::string strf(const char* fmt, ...) {
    std::va_list args, again;
    va_start(args, fmt);
    va_copy(again, args);
    std::string out((size_t)std::max(0, vsnprintf(nullptr, 0, fmt, args)), '\0');
    vsnprintf(&out[0], out.size() + 1, fmt, again);
    va_end(again);
    va_end(args);
    return out;
}

// The pieces of `text` between `sep`s, as Python's text.split(sep) gives them:
// n separators make n + 1 pieces (lines: a trailing newline leaves an empty last one).
inline std::vector<std::string> split_at(const std::string& text, char sep) {
    std::vector<std::string> pieces;
    size_t start = 0;
    for (size_t at; (at = text.find(sep, start)) != std::string::npos; start = at + 1)
        pieces.push_back(text.substr(start, at - start));
    pieces.push_back(text.substr(start));
    return pieces;
}

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

// ----------------------------------------------------------------------------
// checked file I/O

inline FILE* open_file(const std::string& path, const char* mode) {
    FILE* f = fopen(path.c_str(), mode);
    CHECK(f != nullptr, "cannot open %s: %s", path.c_str(), strerror(errno));
    struct stat st;  // a directory opens for reading on Linux, then reads as empty: say what it is
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) fail("%s is a directory, not a file", path.c_str());
    return f;
}

inline bool file_exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// A "Field: N kB" line of a /proc file, in bytes (MemAvailable of /proc/meminfo,
// VmHWM of /proc/self/status); 0 where the file or the field is not there.
inline double proc_kb_field_bytes(const char* path, const char* field) {
    FILE* f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    const size_t n = strlen(field);
    double kb = 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = atof(line + n + 1);
            break;
        }
    fclose(f);
    return kb * 1024.0;
}

inline size_t file_size(FILE* f) {
    long here = ftell(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, here, SEEK_SET);
    return (size_t)size;
}

// Reads exactly `bytes` or fails naming the file: a short read means a truncated file.
inline void read_exact(FILE* f, void* dst, size_t bytes, const std::string& path) {
    size_t got = fread(dst, 1, bytes, f);
    CHECK(got == bytes, "%s is truncated: wanted %zu more bytes, found %zu", path.c_str(), bytes, got);
}

inline void seek_to(FILE* f, size_t offset, const std::string& path) {
    CHECK(fseeko(f, (off_t)offset, SEEK_SET) == 0, "cannot seek in %s: %s", path.c_str(), strerror(errno));
}

inline void write_exact(FILE* f, const void* src, size_t bytes, const std::string& path) {
    size_t put = fwrite(src, 1, bytes, f);
    CHECK(put == bytes, "cannot write %s: %s", path.c_str(), strerror(errno));
}

// A whole file's bytes (pipes too: it reads until the end rather than asking the size),
// or its first ones beyond `most`, where a caller bounds what it holds.
inline std::string read_file_bytes(const std::string& path, size_t most = SIZE_MAX) {
    FILE* f = open_file(path, "rb");
    std::string text;
    char buf[65536];
    size_t got;
    while (text.size() <= most && (got = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
    bool bad = ferror(f) != 0;
    fclose(f);
    CHECK(!bad, "cannot read %s", path.c_str());
    return text;
}

// mkdir -p
inline void make_dir(const std::string& path) {
    for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
        mkdir(path.substr(0, slash).c_str(), 0755);  // parents; errors surface below
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
        fail("cannot create directory %s: %s", path.c_str(), strerror(errno));
}
// The folder a file `path` goes into, made (mkdir -p of its parent; nothing for a bare name).
inline void make_dir_for(const std::string& path) {
    if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0) make_dir(path.substr(0, slash));
}

// A file that appears under its final name only once it is complete: written to
// `path.tmp`, flushed to disk, then renamed (rename is atomic on POSIX).
struct AtomicFile {
    std::string path, tmp;
    FILE* f = nullptr;
    explicit AtomicFile(const std::string& final_path) : path(final_path), tmp(final_path + ".tmp") {
        f = open_file(tmp, "wb");
    }
    void write(const void* src, size_t bytes) { done(fwrite(src, 1, bytes, f) == bytes, "write"); }
    void write_at(size_t offset, const void* src, size_t bytes) {
        done(fseeko(f, (off_t)offset, SEEK_SET) == 0, "seek in");
        write(src, bytes);
    }
    void commit() {
        done(fflush(f) == 0 && fsync(fileno(f)) == 0, "flush");
        fclose(f);
        f = nullptr;
        CHECK(rename(tmp.c_str(), path.c_str()) == 0, "cannot rename %s to %s: %s", tmp.c_str(), path.c_str(),
              strerror(errno));
    }
    ~AtomicFile() {
        if (f) {  // never committed: leave nothing half-written behind
            fclose(f);
            unlink(tmp.c_str());
        }
    }
    // A failed write ends the run, the half-written file removed first (fail() runs no destructor).
    void done(bool ok, const char* what) {
        if (ok) return;
        const int error = errno;
        fclose(f), f = nullptr, unlink(tmp.c_str());
        fail("cannot %s %s: %s", what, tmp.c_str(), strerror(error));
    }
};

// The whole of `text` as the file `path`, atomically (AtomicFile).
inline void write_file_atomically(const std::string& path, const std::string& text) {
    AtomicFile f(path);
    f.write(text.data(), text.size());
    f.commit();
}

// Running the trainer from the reproduction: one command, its output kept in a
// log file, its exit status and wall time returned, and how busy other jobs
// kept the machine meanwhile.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zero/base/common.h"
#include "zero/reproduce/report.h"

struct CommandRun {
    int status = -1;      // exit status; -1 if it did not exit normally
    double seconds = 0;   // wall time
    double others = 0;    // the share of the machine's cores that other processes kept busy meanwhile
    std::string output;   // stdout and stderr together (also in the log file)
};

// CPU seconds the whole machine has been busy (/proc/stat: user, nice, system, irq, softirq, steal), less
// those of this process's waited-for children (the commands it ran): what other processes took.
inline double others_cpu_seconds() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    double v[8] = {};
    in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
    rusage u;
    getrusage(RUSAGE_CHILDREN, &u);
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / sysconf(_SC_CLK_TCK) -
           (u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec));
}

// The whole file ("" if it cannot be read).
inline std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline CommandRun run_logged(const std::string& command, const std::string& log_path) {
    CommandRun r;
    HostClock clock;
    const double others = others_cpu_seconds();
    int raw = std::system((command + " > '" + log_path + "' 2>&1").c_str());
    r.seconds = clock.seconds();
    r.others = std::max(0.0, others_cpu_seconds() - others) / (r.seconds * sysconf(_SC_NPROCESSORS_ONLN));
    r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.output = read_text_file(log_path);
    return r;
}

// "[3/8] WHAT; about 3 min left": the progress line once `done` of `total` runs took `elapsed` seconds.
inline std::string progress_line(int done, int total, double elapsed, const std::string& what) {
    const std::string line = fmt("[%.0f/%.0f] ", done, total) + what;
    if (done >= total) return line;
    const double left = elapsed / done * (total - done);
    return line + (left < 90 ? fmt("; about %.0f s left", left) : fmt("; about %.0f min left", left / 60));
}

// The first line of `text` that contains `needle`, without its newline ("" if none).
inline std::string line_with(const std::string& text, const std::string& needle) {
    size_t at = text.find(needle);
    if (at == std::string::npos) return "";
    size_t begin = text.rfind('\n', at), end = text.find('\n', at);
    begin = begin == std::string::npos ? 0 : begin + 1;
    return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// Why a run failed: its first "error:" line, else its exit status.
inline std::string failure_reason(const CommandRun& r) {
    std::string err = line_with(r.output, "error:");
    return err.empty() ? "exit status " + std::to_string(r.status) : err;
}

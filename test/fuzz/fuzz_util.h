// What every fuzz target shares. A target is LLVMFuzzerTestOneInput(data, size):
// it hands the bytes to one parser of untrusted input, the way the trainer
// would, and returns. A refusal (fail(), which throws Refusal in these builds:
// -DZERO_FAIL_THROWS) is the right answer to bad bytes; anything else -- a
// crash, an out-of-bounds access, undefined behaviour, a hang -- is a bug.
//
// Built two ways: with clang's libFuzzer and sanitizers by `make fuzz`, and
// with a plain main() (replay_main.cpp) that CTest runs over the committed
// corpus (test/fuzz/corpus/<target>/ and crashes/<target>/).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zero/base/common.h"

// Parsers that read files get the bytes through one scratch file per process.
inline std::string fuzz_scratch_path(const char* suffix = ".bin") {
    static const std::string base = "/tmp/zero_fuzz_" + std::to_string(getpid());
    return base + suffix;
}
inline std::string write_scratch(const uint8_t* data, size_t size, const char* suffix = ".bin") {
    std::string path = fuzz_scratch_path(suffix);
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

// A refusal thrown between fopen and fclose leaves the scratch file open (the
// product exits at a refusal, so it never leaks); closes every descriptor of
// this process that points at a scratch file, so a long run does not run out.
inline void close_scratch_files() {
    static const std::string prefix = fuzz_scratch_path("");
    DIR* d = opendir("/proc/self/fd");
    if (!d) return;
    std::vector<int> leaked;
    while (dirent* e = readdir(d)) {
        char target[4096];
        std::string link = std::string("/proc/self/fd/") + e->d_name;
        ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        if (std::string(target).compare(0, prefix.size(), prefix) == 0) leaked.push_back(atoi(e->d_name));
    }
    closedir(d);
    for (int fd : leaked) close(fd);
}

// Runs fn; a Refusal is fine (bad input, refused with a message).
template <typename Fn>
void refusal_ok(Fn fn) {
    try {
        fn();
    } catch (const Refusal&) {
        close_scratch_files();
    }
}

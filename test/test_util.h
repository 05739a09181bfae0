// A tiny test harness: no framework, just checks that count failures and a
// summary line. A test binary returns nonzero if any check failed, and 77 (CTest's
// SKIP_RETURN_CODE) when what it needs is not present.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// atomic: checks may run on emulated-rank threads; inline: one count for all of a binary's sources
inline std::atomic<int> g_test_failures{0};
inline std::atomic<int> g_test_checks{0};

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        ++g_test_checks;                                                   \
        if (!(cond)) {                                                     \
            ++g_test_failures;                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

#define EXPECT_EQ(a, b) EXPECT((a) == (b), "%s = %lld, %s = %lld", #a, (long long)(a), #b, (long long)(b))

inline int test_summary(const char* name) {
    if (g_test_checks == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    printf("%s: %d checks, %d failed\n", name, g_test_checks.load(), g_test_failures.load());
    return g_test_failures == 0 ? 0 : 1;
}

constexpr int TEST_SKIP = 77;

// The Python that runs the PyTorch references under dev/: Debian's interpreter
// (python3-torch belongs to it; the python3 first on PATH may be another one),
// or $ZERO_PYTHON where torch lives elsewhere (the GPU machine's environment).
inline std::string reference_python() {
    const char* p = getenv("ZERO_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

// The arguments a test program was started with, as many as `usage` names in
// angle brackets ("<train_gpt2_zero_cpu> <gpt2_reference.py>"). With fewer, it
// prints the usage line and exits with status 2: CTest passes them, a person
// running the binary by hand learns what it wants.
inline std::vector<std::string> test_args(int argc, char** argv, const char* usage) {
    int wanted = (int)std::count(usage, usage + strlen(usage), '<');
    if (argc - 1 < wanted) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        exit(2);
    }
    return std::vector<std::string>(argv + 1, argv + 1 + wanted);
}

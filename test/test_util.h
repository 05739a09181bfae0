// A tiny test harness: no framework, just checks that count failures and a
// summary line. A test binary returns nonzero if any check failed, and 77 (CTest's
// SKIP_RETURN_CODE) when what it needs is not present.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

// atomic: checks may run on emulated-rank threads
static std::atomic<int> g_test_failures{0};
static std::atomic<int> g_test_checks{0};

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

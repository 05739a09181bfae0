// For testing code that ends in fail() (which exits the process): run it in a
// forked child and look at its exit status and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>

#include "test/test_util.h"
#include "zero/base/common.h"

struct ChildResult {
    int status;       // exit status, -1 if the child did not exit normally
    std::string err;  // what it wrote to stderr
};

inline ChildResult run_in_child(const std::function<void()>& fn) {
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe failed");
    fflush(nullptr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        fn();
        fflush(nullptr);
        _exit(0);
    }
    close(fds[1]);
    std::string err;
    char buf[512];
    ssize_t got;
    while ((got = read(fds[0], buf, sizeof(buf))) > 0) err.append(buf, (size_t)got);
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    return {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, err};
}

// fn must end the process with exit status 1 and exactly one stderr line, an
// "error: " line containing message_part.
inline void expect_failure(const std::string& what, const std::function<void()>& fn, const std::string& message_part) {
    ChildResult r = run_in_child(fn);
    EXPECT(r.status == 1, "%s: expected exit status 1, got %d (stderr: %s)", what.c_str(), r.status, r.err.c_str());
    EXPECT(r.err.find(message_part) != std::string::npos, "%s: stderr lacks \"%s\": %s", what.c_str(),
           message_part.c_str(), r.err.c_str());
    EXPECT(std::count(r.err.begin(), r.err.end(), '\n') == 1 && r.err.rfind("error: ", 0) == 0,
           "%s: expected one \"error:\" line: %s", what.c_str(), r.err.c_str());
}

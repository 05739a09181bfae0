// For testing code that ends in fail() (which exits the process), or that must
// run as a process of its own (a rank of a multi-process rendezvous): run it in
// a forked child and look at its exit status and stderr.
//
//   run_in_child(fn)                   fn in a child, waited for
//   start_child(fn) ... wait_child(c)  children running at the same time
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <string>

#include "test/test_util.h"
#include "zero/base/common.h"

struct ChildResult {
    int status = -1;  // exit status, -1 if the child did not exit normally (a signal, e.g. its alarm)
    std::string err;  // what it wrote to stderr
};

// A started child: its pid and the read end of its stderr pipe.
struct Child {
    pid_t pid = -1;
    int err_fd = -1;
};

// Forks a child that runs fn with its stderr into a pipe and exits with fn's
// return value. alarm_s > 0 arms an alarm in the child, so that a hang becomes
// a failed check (status -1) rather than a stuck suite.
inline Child start_child(const std::function<int()>& fn, unsigned alarm_s = 0) {
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe failed");
    fflush(nullptr);  // or the child would flush the parent's buffered output again
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        if (alarm_s > 0) alarm(alarm_s);
        int code = fn();
        fflush(nullptr);
        _exit(code);
    }
    close(fds[1]);
    return {pid, fds[0]};
}

// Reads the child's stderr to its end, then reaps it.
inline ChildResult wait_child(Child c) {
    ChildResult r;
    char buf[4096];
    ssize_t got;
    while ((got = read(c.err_fd, buf, sizeof(buf))) > 0 || (got < 0 && errno == EINTR))
        if (got > 0) r.err.append(buf, (size_t)got);
    close(c.err_fd);
    int wstatus = 0;
    while (waitpid(c.pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
    return r;
}

// fn in a child that exits 0 when fn returns.
inline ChildResult run_in_child(const std::function<void()>& fn) {
    return wait_child(start_child([&] {
        fn();
        return 0;
    }));
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

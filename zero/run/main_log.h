// DIR/main.log: llm.c's "s:<step> trl:<loss>" and "s:<step> tel:<val loss>"
// lines, one per event, in step order.
//
// A resumed run re-runs the steps after its checkpoint, so it first cuts the
// log back to what the run had logged up to that checkpoint: the training
// losses of steps <= the checkpoint's step and the validation losses before it
// (the validation at the checkpoint's step runs again). The log then reads as
// if the run had never stopped.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

#include "zero/base/common.h"

// Keeps a main.log line when it belongs to the run up to `resume_step`.
inline bool main_log_line_before(const std::string& line, int resume_step) {
    int step;
    char tag[8];
    if (sscanf(line.c_str(), "s:%d %3[a-z]:", &step, tag) != 2) return true;  // not a step line: keep
    return std::string(tag) == "tel" ? step < resume_step : step <= resume_step;
}

// Opens main.log for a run starting at start_step (0: a new log).
inline FILE* open_main_log(const std::string& path, int start_step) {
    if (start_step <= 0) return open_file(path, "w");
    AtomicFile rewritten(path);
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)  // (a torn last line too)
        if (main_log_line_before(line, start_step)) {
            line += '\n';
            rewritten.write(line.data(), line.size());
        }
    rewritten.commit();
    return open_file(path, "a");
}

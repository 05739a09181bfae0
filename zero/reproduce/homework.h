// The classic ZeRO homework: six DeepSpeed configurations (dev/homework/*.json),
// each run through --deepspeed_config, tabulated as rank 0's memory after
// forward, after backward and after the step, and the time per 20 iterations.
//   homework.csv/png, and the DeepSpeed keys the trainer accepted without effect
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/reproduce/report.h"
#include "zero/reproduce/run_command.h"
#include "zero/run/deepspeed_keys.h"

struct HomeworkSettings {
    std::string trainer;
    std::string config_dir = "dev/homework";
    std::string model = "d12";
    int seq_len = 64;
    int ranks = 4;  // the world the JSON files' train_batch_size is written for
    int steps = 3;  // the first warms up; the rest are timed
    std::string flags;
};

struct HomeworkConfig {
    const char* name;
    const char* file;
};
static const HomeworkConfig HOMEWORK_CONFIGS[] = {{"stage 1", "stage1.json"},
                                                  {"stage 2", "stage2.json"},
                                                  {"stage 2 + offload", "stage2_offload.json"},
                                                  {"stage 3", "stage3.json"},
                                                  {"stage 3 + offload", "stage3_offload.json"},
                                                  {"stage 3 + fp16", "stage3_fp16.json"}};

struct HomeworkResult {
    std::string name, file, precision, why;
    bool ran = false;
    double live[3] = {}, peak = 0, host = 0;  // bytes, rank 0, the last step: live after forward, backward, step
    double seconds20 = 0;                     // the trainer's "20 steps take"
};

// The report's lines on a trainer note about a DeepSpeed file: the keys it folds as having no effect here, one
// line each with the reason of the trainer's own key table (zero/run/deepspeed_keys.cpp); another note as it is.
inline std::vector<std::string> explain_note(const std::string& note) {
    const size_t list = note.find("): ");
    if (note.rfind("no effect here (", 0) != 0 || list == std::string::npos) return {"the trainer: \"" + note + "\""};
    std::vector<std::string> lines;
    for (std::string key : split_at(note.substr(list + 3), ',')) {
        key.erase(0, key.find_first_not_of(' '));
        const deepspeed_detail::KnownKey* k = deepspeed_detail::known_key(key);
        lines.push_back("`" + key + "`: no effect here: " + (k ? k->why : "(not in the trainer's table)"));
    }
    return lines;
}

inline std::vector<HomeworkResult> run_homework(const HomeworkSettings& s, const std::string& dir,
                                                std::vector<std::string>& notes,
                                                const std::function<void(const std::string&)>& progress) {
    std::vector<HomeworkResult> results;
    std::set<std::string> seen;
    int k = 0, total = (int)std::size(HOMEWORK_CONFIGS);
    HostClock clock;
    for (const HomeworkConfig& c : HOMEWORK_CONFIGS) {
        HomeworkResult h{.name = c.name, .file = s.config_dir + "/" + c.file};
        std::string run_dir = dir + "/runs/homework_" + std::string(c.file).substr(0, strlen(c.file) - 5);
        run_logged("rm -rf '" + run_dir + "'", "/dev/null");
        const std::string cmd =
            strf("%s -e %s -t %d --ranks %d -x %d -v 0 -s 0 -n -1 --mem_report 1 -o %s %s --deepspeed_config %s",
                 s.trainer.c_str(), s.model.c_str(), s.seq_len, s.ranks, s.steps, run_dir.c_str(), s.flags.c_str(),
                 h.file.c_str());
        CommandRun r = run_logged(cmd, run_dir + ".log");
        // the trainer's notes on the file, each line once
        size_t pos = 0;
        while ((pos = r.output.find("note: ", pos)) != std::string::npos) {
            size_t end = r.output.find('\n', pos);
            std::string note = r.output.substr(pos + 6, end == std::string::npos ? std::string::npos : end - pos - 6);
            pos = end == std::string::npos ? r.output.size() : end;
            const bool on_the_file = note.find("DeepSpeed") != std::string::npos || note.rfind("no effect here", 0) == 0 ||
                                     note.rfind("\"auto\"", 0) == 0;
            if (!on_the_file) continue;
            for (const std::string& line : explain_note(note))
                if (seen.insert(line).second) notes.push_back(line);
        }
        std::string what = "homework: " + std::string(c.name);
        if (r.status == 0) {
            h.ran = true;
            std::string peak_line = line_with(r.output, "measured matmul peak");  // "... (fp32); ..."
            size_t open = peak_line.find('('), close = peak_line.find(')');
            h.precision = open != std::string::npos && close > open ? peak_line.substr(open + 1, close - open - 1) : "";
            std::string t20 = line_with(r.output, "20 steps take");
            size_t at = t20.find("20 steps take ");
            h.seconds20 = at == std::string::npos ? NAN : atof(t20.c_str() + at + 14);
            CsvTable mem = read_csv_table(run_dir + "/mem_report_rank0.csv");
            for (size_t i = 0; i < mem.rows.size(); i++) {
                if (mem.num(i, "step") != s.steps) continue;
                const std::string &ph = mem.text(i, "phase"), &arena = mem.text(i, "arena");
                if (arena == "host" && ph == "step") h.host = mem.num(i, "live_total");
                if (arena != "device") continue;
                h.live[ph == "forward" ? 0 : ph == "backward" ? 1 : 2] = mem.num(i, "live_total");
                h.peak = mem.num(i, "peak");
            }
            what += " (" + h.precision + "): " + fmt("%.1f s", r.seconds);
        } else {
            h.why = failure_reason(r);
            what += ": failed (" + h.why + ")";
        }
        progress(progress_line(++k, total, clock.seconds(), what));
        results.push_back(h);
    }
    return results;
}

inline void write_homework(const HomeworkSettings& s, const std::vector<HomeworkResult>& res,
                           const std::vector<std::string>& notes, const std::string& dir, Report& rep) {
    const double MiB = 1048576.0;
    CsvWriter csv(dir + "/homework.csv", {"config", "json", "precision", "ranks", "after_forward_mib",
                                          "after_backward_mib", "after_step_mib", "peak_mib", "host_mib",
                                          "seconds_per_20_iterations", "status"});
    Chart mem, time;
    mem.title = "rank 0's device memory";
    mem.y.label = "MiB";
    mem.width = 1100, mem.height = 560;
    mem.bars = {{"after forward", {}, plot_color(0)}, {"after backward", {}, plot_color(1)},
                {"after step", {}, plot_color(2)}};
    time.title = "time per 20 iterations";
    time.y.label = "seconds";
    time.width = 1100, time.height = 420;
    time.bars = {{"", {}, plot_color(4)}};
    std::vector<std::vector<std::string>> rows;
    for (const HomeworkResult& h : res) {
        auto mib = [&](double bytes) { return h.ran ? bytes / MiB : NAN; };
        std::string cat = h.name;
        size_t plus = cat.find(" + ");
        if (plus != std::string::npos) cat.replace(plus, 1, "\n");
        mem.categories.push_back(cat);
        time.categories.push_back(cat);
        for (int k = 0; k < 3; k++) mem.bars[k].values.push_back(mib(h.live[k]));
        time.bars[0].values.push_back(h.ran ? h.seconds20 : NAN);
        csv.row({h.name, h.file, h.ran ? h.precision : "", std::to_string(s.ranks), csv_num(mib(h.live[0])),
                 csv_num(mib(h.live[1])), csv_num(mib(h.live[2])), csv_num(mib(h.peak)), csv_num(mib(h.host)),
                 csv_num(h.ran ? h.seconds20 : NAN), h.ran ? "measured" : csv_field(h.why)});
        if (h.ran)
            rows.push_back({h.name, "`" + h.file + "`", h.precision, fmt("%.1f", h.live[0] / MiB),
                            fmt("%.1f", h.live[1] / MiB), fmt("%.1f", h.live[2] / MiB), fmt("%.1f", h.peak / MiB),
                            fmt("%.1f", h.host / MiB),
                            fmt("%.2f s", h.seconds20)});
        else rows.push_back({h.name, "`" + h.file + "`", "failed: " + h.why, "", "", "", "", "", ""});
    }
    csv.save();
    write_png(dir + "/homework.png",
              tile_images({render_chart(mem), render_chart(time)}, 1,
                          "The homework: " + s.model + ", " + std::to_string(s.ranks) + " ranks, B 1, T " +
                              std::to_string(s.seq_len)));
    rep.heading("The homework: six DeepSpeed configurations");
    rep.image("homework.png", "homework");
    rep.para("Each configuration is a DeepSpeed JSON file in `" + s.config_dir + "/`, run as `--deepspeed_config` "
             "with " + std::to_string(s.ranks) + " emulated ranks (its `train_batch_size` = " +
             std::to_string(s.ranks) + " x `train_micro_batch_size_per_gpu` 1), " + std::to_string(s.steps) +
             " steps; the table is rank 0's live device memory at the last step, the host memory it holds (offload), "
             "and the trainer's average step time (after the first) times 20. Precision is what the file asks for: "
             "DeepSpeed trains in fp32 unless `fp16` or `bf16` is enabled. Numbers: `homework.csv`.");
    rep.table({"configuration", "file", "precision", "after fwd MiB", "after bwd MiB", "after step MiB", "peak MiB",
               "host MiB", "20 iterations"},
              rows);
    if (!notes.empty()) {
        std::string list = "Keys the trainer accepted without effect here, as it said when reading the files:\n\n";
        for (const std::string& n : notes) list += "- " + n + "\n";
        rep.para(list);
    }
}

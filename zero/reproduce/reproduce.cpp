// reproduce: the ZeRO paper's memory and communication results and the classic
// homework, in one command (`make reproduce`). Writes OUT/report.md, one PNG per
// figure and one CSV per figure or table, and prints a line per trainer run.
//
//   build/reproduce --trainer ./train_gpt2_zero_cpu [--out out/reproduce] [...]: the flags with --help
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/reproduce/homework.h"
#include "zero/reproduce/measured.h"
#include "zero/reproduce/paper_figures.h"
#include "zero/reproduce/pipeline_figures.h"
#include "zero/reproduce/report.h"
#include "zero/reproduce/paper_throughput.h"
#include "zero/reproduce/throughput_check.h"

struct Args {
    std::string out = "out/reproduce";
    std::string parts = "paper,memory,homework,pipeline,check,throughput";
    std::string profiles = "zero/perf/profiles";
    std::string device = "CPU";
    MeasureSettings measure;
    HomeworkSettings homework;
    PipelineSettings pipeline;
    CheckSettings check;
};

static int parse_int(const std::string& flag, const std::string& v, int lo) {
    char* end = nullptr;
    long x = strtol(v.c_str(), &end, 10);
    CHECK(!v.empty() && *end == '\0' && x >= lo && x <= 1 << 20, "%s wants an integer >= %d, got '%s'", flag.c_str(),
          lo, v.c_str());
    return (int)x;
}

static Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string f = argv[i];
        if (f == "-h" || f == "--help") {
            printf("usage: %s --trainer PATH [--out DIR] [--parts paper,memory,homework,pipeline,check,throughput]\n"
                   "       [--device CPU|GPU] [--profiles zero/perf/profiles]\n"
                   "       [--model d12] [--memory_model MODEL] [--precision fp32] [-b 1] [-t 64] [--ranks 1,2,4,8]\n"
                   "       [--homework_dir dev/homework] [--homework_ranks 4] [--homework_steps 3] [--homework_t 64]\n"
                   "       [--trainer_flags FLAGS]\n",
                   argv[0]);
            exit(0);
        }
        CHECK(i + 1 < argc, "%s needs a value (see --help)", f.c_str());
        std::string v = argv[++i];
        if (f == "--trainer") a.measure.trainer = a.homework.trainer = a.pipeline.trainer = a.check.trainer = v;
        else if (f == "--out") a.out = v;
        else if (f == "--parts") a.parts = v;
        else if (f == "--profiles") a.profiles = v;
        else if (f == "--device") a.device = v;
        else if (f == "--model") a.measure.model = a.homework.model = v;
        else if (f == "--memory_model") a.measure.model = v;  // the memory-vs-N runs only (--model: both)
        else if (f == "--precision") a.measure.precision = v;
        else if (f == "-b") a.measure.micro_batch = parse_int(f, v, 1);
        else if (f == "-t") a.measure.seq_len = parse_int(f, v, 1);
        else if (f == "--homework_t") a.homework.seq_len = parse_int(f, v, 1);
        else if (f == "--homework_dir") a.homework.config_dir = v;
        else if (f == "--homework_ranks") a.homework.ranks = parse_int(f, v, 1);
        else if (f == "--homework_steps") a.homework.steps = parse_int(f, v, 2);
        else if (f == "--trainer_flags") a.measure.flags = a.homework.flags = a.check.flags = v;
        else if (f == "--ranks") {
            a.measure.ranks.clear();
            for (const std::string& one : split_csv_line(v)) a.measure.ranks.push_back(parse_int(f, one, 1));
        } else fail("unknown flag %s (see --help)", f.c_str());
    }
    std::vector<std::string> parts = split_csv_line(a.parts);
    if (parts.back().empty()) parts.pop_back();  // "" and a trailing comma name no part
    for (const std::string& p : parts)
        CHECK(p == "paper" || p == "memory" || p == "homework" || p == "pipeline" || p == "check" || p == "throughput",
              "--parts: unknown part '%s' (paper, memory, homework, pipeline, check, throughput)", p.c_str());
    bool runs = a.parts.find("memory") != std::string::npos || a.parts.find("homework") != std::string::npos ||
                a.parts.find("pipeline") != std::string::npos || a.parts.find("check") != std::string::npos;
    CHECK(!runs || !a.measure.trainer.empty(), "--trainer is needed to measure (memory, homework, pipeline, check)");
    CHECK(!runs || file_exists(a.measure.trainer), "trainer %s does not exist (make cpu, or make)",
          a.measure.trainer.c_str());
    return a;
}

int main(int argc, char** argv) {
    Args a = parse_args(argc, argv);
    HostClock clock;
    make_dir(a.out);
    make_dir(a.out + "/runs");
    auto has = [&](const char* part) { return a.parts.find(part) != std::string::npos; };
    auto progress = [](const std::string& line) {
        printf("%s\n", line.c_str());
        fflush(stdout);
    };

    Report rep;
    time_t now = time(nullptr);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    rep.md = "# Reproducing ZeRO (arXiv 1910.02054) and the homework\n\n";
    rep.para("Written by `make reproduce` (`build/reproduce`) on " + std::string(date) + ", " + a.device +
             " build (`" + (a.measure.trainer.empty() ? std::string("no trainer") : a.measure.trainer) + "`), " +
             std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
             " cores. Every figure has a CSV beside it with the numbers it plots.");
    if (has("paper")) {
        write_table1(a.out, rep);
        write_figure1(a.out, rep);
        write_table2(a.out, rep);
        progress("paper: Table 1, Figure 1, Table 2 written");
    }
    if (has("memory")) {
        std::vector<MeasuredPoint> pts = measure_memory_and_traffic(a.measure, a.out, progress);
        write_memory_figures(a.measure, pts, a.out, rep);
    }
    if (has("homework")) {
        std::vector<std::string> notes;
        std::vector<HomeworkResult> res = run_homework(a.homework, a.out, notes, progress);
        write_homework(a.homework, res, notes, a.out, rep);
    }
    if (has("pipeline")) write_pipeline_figures(a.pipeline, a.out, rep, progress);
    if (has("throughput")) {
        write_paper_throughput(a.out, a.profiles, rep);
        progress("throughput: the paper's section 10 predicted on " + a.profiles);
    }
    if (has("check")) {
        a.check.profile = a.out + "/measured_profile.json";
        if (a.check.runs.empty()) a.check.runs = a.device == "GPU" ? gpu_check_runs() : cpu_check_runs();
        std::vector<CheckPoint> pts = check_throughput(a.check, a.out, progress);
        write_throughput_check(a.check, pts, a.out, a.device, rep);
    }
    double secs = clock.seconds();
    rep.md += fmt("Total wall time: %.0f s.\n", secs);
    rep.save(a.out + "/report.md");
    printf("report: %s/report.md (%.0f s)\n", a.out.c_str(), secs);
    return 0;
}

// The loss curve of a run with -o: DIR/loss.png beside DIR/main.log, train and
// validation loss against the step, and the data's unigram baseline as a
// horizontal line when the data's folder records it (`make data` writes
// data/mobydick/unigram_entropy.txt: the validation tokens' cross-entropy under
// the training set's token frequencies; below it the model uses context).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "zero/base/plot.h"

// The unigram baseline beside the training shards (the folder of the -i pattern), or NAN.
inline double unigram_baseline_for(const std::string& train_pattern) {
    size_t slash = train_pattern.rfind('/');
    std::string dir = slash == std::string::npos ? "." : train_pattern.substr(0, slash);
    FILE* f = fopen((dir + "/unigram_entropy.txt").c_str(), "r");
    if (!f) return NAN;
    double h = NAN;
    if (fscanf(f, "%lf", &h) != 1) h = NAN;
    fclose(f);
    return h;
}

// Reads main.log's "s:<step> trl:<loss>" and "s:<step> tel:<loss>" lines and
// draws them; returns whether a PNG was written.
inline bool write_loss_plot(const std::string& out_dir, double baseline) {
    FILE* f = fopen((out_dir + "/main.log").c_str(), "r");
    if (!f) return false;
    LineSeries train{.label = "train loss", .color = plot_color(0), .markers = false};
    LineSeries val{.label = "val loss", .color = plot_color(1)};
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        int step;
        double loss;
        char tag[8];
        if (sscanf(line, "s:%d %3[a-z]:%lf", &step, tag, &loss) != 3) continue;
        LineSeries& s = std::string(tag) == "tel" ? val : train;
        s.x.push_back(step), s.y.push_back(loss);
    }
    fclose(f);
    if (train.x.empty() && val.x.empty()) return false;
    // losses live far from zero (4 to 11 for GPT-2's vocabulary): the axis fits them
    Chart c{.title = "loss: " + out_dir, .x = {.label = "step"}, .y = {.label = "loss (nats per token)", .from_zero = false},
            .lines = {train, val}};
    if (std::isfinite(baseline)) c.hlines.push_back({strf("unigram baseline %.3f", baseline), baseline, plot_color(3)});
    return write_png(out_dir + "/loss.png", render_chart(c));
}

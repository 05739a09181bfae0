// The loss curve a run with -o draws beside main.log (zero/run/loss_plot.h):
// loss.png exists and decodes, shows the train and validation curves, and the
// unigram baseline line exactly when the data's folder records one
// (unigram_entropy.txt, as `make data` writes beside the Moby-Dick shards),
// and the vertical axis fits the losses: the baseline, just below them, is
// drawn near the bottom of the picture, not a third of the way up as on an
// axis running from zero.
//
// usage: test_loss_plot <train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/trainer_run.h"
#include "zero/base/plot.h"

#ifdef ZERO_HAVE_STB
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "stb_image.h"
#pragma GCC diagnostic pop
#endif

// Pixels of colour c in the decoded PNG at path (-1 if it does not decode),
// and where the row holding most of them lies, as a fraction of the height.
static long count_in_png(const std::string& path, Rgb c, double* fullest_row = nullptr) {
#ifdef ZERO_HAVE_STB
    int w = 0, h = 0, n = 0;
    unsigned char* px = stbi_load(path.c_str(), &w, &h, &n, 3);
    if (!px) return -1;
    long count = 0, best = -1;
    for (int y = 0; y < h; y++) {
        long row = 0;
        for (int x = 0; x < w; x++) {
            const unsigned char* p = px + 3 * ((long)y * w + x);
            row += p[0] == c.r && p[1] == c.g && p[2] == c.b;
        }
        count += row;
        if (fullest_row && row > best) best = row, *fullest_row = (double)y / h;
    }
    stbi_image_free(px);
    return count;
#else
    (void)path, (void)c, (void)fullest_row;
    return -1;
#endif
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    if (!png_available()) {
        printf("loss_plot: built without stb (no PNG): skipped\n");
        return TEST_SKIP;
    }
    const std::string dir = "loss_plot";
    run_command("rm -rf " + dir + " && mkdir -p " + dir + "/with " + dir + "/without");
    for (const char* sub : {"with", "without"}) {
        write_markov_shard(dir + "/" + sub + "/train.bin", TINY_VOCAB, 20000, 9);
        write_markov_shard(dir + "/" + sub + "/val.bin", TINY_VOCAB, 4000, 10);
    }
    FILE* f = fopen((dir + "/with/unigram_entropy.txt").c_str(), "w");
    fprintf(f, "4.25\n");
    fclose(f);
    for (const char* sub : {"with", "without"}) {
        TrainerRun run = base;
        run.model = TINY;
        run.train = dir + "/" + sub + "/train.bin";
        run.val = dir + "/" + sub + "/val.bin";
        run.out = dir + "/" + sub + "/run";
        run.micro_batch = 2, run.seq_len = 32, run.steps = 6;
        run.val_every = 2;
        run.extra = "-m 2 -n -1";
        RunResult r = run.run();
        std::string png = run.out + "/loss.png";
        EXPECT(r.output.find("loss curve: " + png) != std::string::npos, "%s: no 'loss curve:' line", sub);
        double baseline_row = -1;
        long train = count_in_png(png, plot_color(0)), val = count_in_png(png, plot_color(1)),
             baseline = count_in_png(png, plot_color(3), &baseline_row);
        EXPECT(train > 100 && val > 50, "%s: %ld train and %ld val pixels in %s", sub, train, val, png.c_str());
        bool want = std::string(sub) == "with";
        EXPECT((baseline > 100) == want, "%s a baseline file: %ld baseline pixels", want ? "with" : "without", baseline);
        // losses from ln(512) = 6.2 down, the baseline at 4.25: on an axis fitted to them the baseline
        // is the lowest value drawn (near the bottom), on one from zero it would sit 60% of the way up
        if (want)
            EXPECT(baseline_row > 0.75, "the baseline's row at %.0f%% of the height: the axis does not fit the losses",
                   100 * baseline_row);
    }
    return test_summary("loss_plot");
}

// The loss curve a run with -o draws beside main.log (zero/run/loss_plot.h):
// loss.png exists and decodes, shows the train and validation curves, and the
// unigram baseline line exactly when the data's folder records one
// (unigram_entropy.txt, as `make data` writes beside the Moby-Dick shards).
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

// Pixels of colour c in the decoded PNG at path; -1 if it does not decode.
static long count_in_png(const std::string& path, Rgb c) {
#ifdef ZERO_HAVE_STB
    int w = 0, h = 0, n = 0;
    unsigned char* px = stbi_load(path.c_str(), &w, &h, &n, 3);
    if (!px) return -1;
    long count = 0;
    for (long i = 0; i < (long)w * h; i++) count += px[3 * i] == c.r && px[3 * i + 1] == c.g && px[3 * i + 2] == c.b;
    stbi_image_free(px);
    return count;
#else
    (void)path, (void)c;
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
        long train = count_in_png(png, plot_color(0)), val = count_in_png(png, plot_color(1)),
             baseline = count_in_png(png, plot_color(3));
        EXPECT(train > 100 && val > 50, "%s: %ld train and %ld val pixels in %s", sub, train, val, png.c_str());
        bool want = std::string(sub) == "with";
        EXPECT((baseline > 100) == want, "%s a baseline file: %ld baseline pixels", want ? "with" : "without", baseline);
    }
    return test_summary("loss_plot");
}

// The chart renderer (zero/base/plot.h) and the CSV reader (zero/base/csv.h):
//   * a chart has the size asked for, and the series' colours inside its axes
//     (and none of them in a chart without series);
//   * the title is there: a rendering of the same string alone is found, pixel
//     for pixel, in the chart's top band, and a different string is not;
//   * positions: a point at 10 on a 1..100 log axis sits half way; bars of 10
//     and 20 stand in the ratio 1:2, and a stack of 10 + 10 as high as the 20;
//     a box from 0 to 5 on a 0..10 axis fills the left half of its row, with
//     its label inside, and one too small for its label has none;
//   * the PNG decodes (stb_image) to the same pixels;
//   * a CSV written by CsvWriter reads back field for field.
// Skipped (77) when built without stb: there is then no text and no PNG.
#include <cstdio>
#include <string>

#include "test/test_util.h"
#include "zero/base/csv.h"
#include "zero/base/plot.h"

#ifdef ZERO_HAVE_STB
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "stb_image.h"
#pragma GCC diagnostic pop
#endif

static long count_color(const Image& img, const PlotArea& a, Rgb c) {
    long n = 0;
    for (int y = a.y0 + 1; y < a.y1; y++)
        for (int x = a.x0 + 1; x < a.x1; x++) n += img.at(x, y) == c;
    return n;
}

// Whether `text` drawn at `scale` appears somewhere in rows [0, band) of img.
static bool find_text(const Image& img, int band, const std::string& text, int scale) {
    int w = text_width(text, scale), h = text_height(text, scale);
    Image alone(w, h);
    draw_text(alone, 0, 0, text, PLOT_INK, scale);
    std::vector<std::pair<int, int>> ink, blank;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) (alone.at(i, j) == PLOT_INK ? ink : blank).push_back({i, j});
    if (ink.empty()) return false;
    for (int y = 0; y + h <= band && y + h <= img.height; y++)
        for (int x = 0; x + w <= img.width; x++) {
            bool match = true;
            for (auto& p : ink)
                if (img.at(x + p.first, y + p.second) != PLOT_INK) { match = false; break; }
            for (size_t k = 0; match && k < blank.size(); k++)
                if (img.at(x + blank[k].first, y + blank[k].second) == PLOT_INK) match = false;
            if (match) return true;
        }
    return false;
}

// Rows of the first column (from the top) holding colour c at x.
static std::pair<int, int> column_extent(const Image& img, int x, Rgb c) {
    int top = -1, bottom = -1;
    for (int y = 0; y < img.height; y++)
        if (img.at(x, y) == c) {
            if (top < 0) top = y;
            bottom = y;
        }
    return {top, bottom};
}

int main() {
    if (!png_available() || !plot_text_available()) {
        printf("plot: built without stb (no text, no PNG): skipped\n");
        return TEST_SKIP;
    }
    // ---- a line chart on log-log axes
    Chart c;
    c.title = "memory per rank vs N";
    c.x.label = "ranks N";
    c.y.label = "memory (GB)";
    c.x.log = c.y.log = true;
    c.width = 800, c.height = 500;
    c.lines.push_back({"measured", {1, 10, 100}, {1, 10, 100}, plot_color(0), false, true, true});
    c.lines.push_back({"formula", {1, 100}, {100, 1}, plot_color(3), true, false, true});
    PlotArea a;
    Image img = render_chart(c, &a);
    EXPECT(img.width == 800 && img.height == 500 && img.rgb.size() == 800u * 500 * 3, "size %dx%d", img.width,
           img.height);
    EXPECT(a.x0 > 0 && a.y0 > 0 && a.x1 < 800 && a.y1 < 500 && a.x1 - a.x0 > 400 && a.y1 - a.y0 > 250,
           "plot area %d,%d..%d,%d", a.x0, a.y0, a.x1, a.y1);
    long blue = count_color(img, a, plot_color(0)), red = count_color(img, a, plot_color(3));
    EXPECT(blue > 500 && red > 200, "series pixels inside the axes: %ld and %ld", blue, red);
    // the middle point (10, 10) is at the middle of both log axes
    int mx = (a.x0 + a.x1) / 2, my = (a.y0 + a.y1) / 2;
    EXPECT(img.at(mx, my) == plot_color(0) || img.at(mx, my) == plot_color(3), "nothing drawn at the centre (10, 10)");
    EXPECT(find_text(img, a.y0, c.title, 3), "the title's pixels are not in the top band");
    EXPECT(!find_text(img, a.y0, "memory per rank vs M", 3), "a different title matched: the search cannot fail");
    Chart empty = c;
    empty.lines.clear();
    Image none = render_chart(empty, &a);
    EXPECT(count_color(none, a, plot_color(0)) == 0, "a chart without series has series pixels");

    // ---- bars: grouped, then stacked, on a 0..20 axis
    Chart b;
    b.title = "bars";
    b.y.label = "MiB";
    b.y.min = 0, b.y.max = 20;
    b.categories = {"one", "two"};
    b.bars = {{"a", {10, 20}, plot_color(1)}, {"b", {10, 0}, plot_color(2)}};
    Image bi = render_chart(b, &a);
    double group = (a.x1 - a.x0) / 2.0, bar = group * 0.8 / 2;
    int x_a0 = (int)(a.x0 + group * 0.1 + bar / 2), x_a1 = (int)(a.x0 + group + group * 0.1 + bar / 2);
    auto e0 = column_extent(bi, x_a0, plot_color(1)), e1 = column_extent(bi, x_a1, plot_color(1));
    int h0 = e0.second - e0.first + 1, h1 = e1.second - e1.first + 1;
    EXPECT(e0.first > 0 && std::abs(2 * h0 - h1) <= 3, "grouped bars of 10 and 20: %d and %d pixels high", h0, h1);
    EXPECT(std::abs(e1.first - a.y0) <= 1, "the bar of 20 reaches the top of a 0..20 axis: %d vs %d", e1.first, a.y0);
    b.stacked = true;
    Image si = render_chart(b, &a);
    int x_s0 = (int)(a.x0 + group / 2);
    auto s_a = column_extent(si, x_s0, plot_color(1)), s_b = column_extent(si, x_s0, plot_color(2));
    EXPECT(s_b.second < s_a.first && std::abs(s_b.first - a.y0) <= 1,
           "stack 10 + 10: lower part %d..%d, upper part %d..%d, top of axis %d", s_a.first, s_a.second, s_b.first,
           s_b.second, a.y0);

    // ---- boxes (a timeline's slots): where their corners say, labelled where the label fits
    Chart tl;
    tl.x.min = 0, tl.x.max = 10, tl.x.ticks = {0, 5, 10};
    tl.y.min = -0.5, tl.y.max = 1.5, tl.y.ticks = {0, 1};
    tl.boxes = {{0, 5, -0.4, 0.4, plot_color(4), "F0", "forward"}, {5, 5.1, 0.6, 1.4, plot_color(5), "B0", "backward"}};
    Image ti = render_chart(tl, &a);
    double px_per_x = (a.x1 - a.x0) / 10.0, py_per_y = (a.y1 - a.y0) / 2.0;
    int row0 = (int)std::lround(a.y1 - 0.5 * py_per_y);  // y = 0
    long inside = 0, beyond = 0;
    for (int x = a.x0 + 2; x < a.x1 - 2; x++) {
        if (x < a.x0 + 5 * px_per_x - 2) inside += ti.at(x, row0) == plot_color(4);
        if (x > a.x0 + 5 * px_per_x + 2) beyond += ti.at(x, row0) == plot_color(4);
    }
    EXPECT(inside > 0.8 * 5 * px_per_x && beyond == 0, "the box 0..5 at y 0: %ld pixels of its colour inside, %ld beyond",
           inside, beyond);
    EXPECT(find_text(ti, a.y1, "F0", 2) || find_text(ti, a.y1, "F0", 1), "the box's label is not drawn");
    EXPECT(!find_text(ti, a.y1, "B0", 2) && !find_text(ti, a.y1, "B0", 1), "a label drawn outside its small box");

    // ---- PNG round trip
    std::string png = "plot_test.png";
    EXPECT(write_png(png, img), "write_png failed");
#ifdef ZERO_HAVE_STB
    int w = 0, h = 0, n = 0;
    unsigned char* px = stbi_load(png.c_str(), &w, &h, &n, 3);
    EXPECT(px && w == img.width && h == img.height, "the PNG decodes to %dx%d", w, h);
    if (px) {
        EXPECT(memcmp(px, img.rgb.data(), img.rgb.size()) == 0, "the PNG's pixels differ from the image's");
        stbi_image_free(px);
    }
#endif

    // ---- CSV round trip
    CsvWriter wcsv("plot_test.csv", {"psi", "nd", "gb"});
    wcsv.row({"7.5e9", "64", csv_num(31.4, "%.4g")});
    wcsv.row({"1e12", "1024", csv_num(15.625)});
    wcsv.save();
    CsvTable t = read_csv_table("plot_test.csv");
    EXPECT(t.header.size() == 3 && t.rows.size() == 2, "%zu columns, %zu rows", t.header.size(), t.rows.size());
    if (t.rows.size() == 2) {
        EXPECT(t.num(0, "psi") == 7.5e9 && t.num(1, "nd") == 1024 && t.num(0, "gb") == 31.4 && t.num(1, "gb") == 15.625,
               "values read back: %g %g %g %g", t.num(0, "psi"), t.num(1, "nd"), t.num(0, "gb"), t.num(1, "gb"));
        EXPECT(t.column("missing") == -1, "a missing column has an index");
    }
    return test_summary("plot");
}

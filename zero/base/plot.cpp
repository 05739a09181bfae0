// The chart renderer behind plot.h: layout (margins from the text sizes),
// ticks, grid, data, legend, then PNG. Pixels only; no anti-aliasing.
#include "zero/base/plot.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "zero/base/common.h"

#ifdef ZERO_HAVE_STB
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include "stb_easy_font.h"
#include "stb_image_write.h"
#pragma GCC diagnostic pop
#endif

Rgb plot_color(int i) {
    static const Rgb palette[10] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
                                    {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
    return palette[((i % 10) + 10) % 10];
}

Image::Image(int w, int h, Rgb background) : width(w), height(h), rgb((size_t)w * h * 3) {
    for (size_t i = 0; i < rgb.size(); i += 3) rgb[i] = background.r, rgb[i + 1] = background.g, rgb[i + 2] = background.b;
}

Rgb Image::at(int x, int y) const {
    const uint8_t* p = &rgb[((size_t)y * width + x) * 3];
    return {p[0], p[1], p[2]};
}

void Image::set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    uint8_t* p = &rgb[((size_t)y * width + x) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
}

void Image::fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
    x0 = std::max(x0, 0), y0 = std::max(y0, 0), x1 = std::min(x1, width), y1 = std::min(y1, height);
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) set(x, y, c);
}

void Image::blit(const Image& src, int x, int y) {
    for (int j = 0; j < src.height; j++)
        for (int i = 0; i < src.width; i++) set(x + i, y + j, src.at(i, j));
}

// ---------------------------------------------------------------------------
// Text. stb_easy_font knows printable ASCII only; anything else prints as '?'.

static std::string printable(std::string s) {
    for (char& ch : s)
        if (ch != '\n' && (ch < 32 || ch > 126)) ch = '?';
    return s;
}

bool plot_text_available() { return png_available(); }  // stb brings both

int text_width(const std::string& s, int scale) {
    std::string t = printable(s);
#ifdef ZERO_HAVE_STB
    return stb_easy_font_width(&t[0]) * scale;
#else
    size_t longest = 0, cur = 0;  // about the font's mean advance
    for (char ch : t) cur = ch == '\n' ? 0 : cur + 1, longest = std::max(longest, cur);
    return (int)longest * 6 * scale;
#endif
}

int text_height(const std::string& s, int scale) {
    if (s.empty()) return 0;
    int lines = 1 + (int)std::count(s.begin(), s.end(), '\n');
    return (lines * 12 - 3) * scale;  // the last line's glyphs end 3 font pixels above its 12-pixel pitch
}

void draw_text(Image& img, int x, int y, const std::string& s, Rgb c, int scale) {
#ifdef ZERO_HAVE_STB
    std::string t = printable(s);
    std::vector<char> quads(t.size() * 1024 + 64);  // 64 bytes a quad, up to ~14 quads a glyph
    int n = stb_easy_font_print(0, 0, &t[0], nullptr, quads.data(), (int)quads.size());
    for (int q = 0; q < n; q++) {
        // 4 vertices of 16 bytes (x, y, z floats, 4 colour bytes); the first and third are opposite corners
        float v0[2], v2[2];
        memcpy(v0, &quads[q * 64], sizeof(v0));
        memcpy(v2, &quads[q * 64 + 32], sizeof(v2));
        int x0 = (int)lroundf(std::min(v0[0], v2[0])), x1 = (int)lroundf(std::max(v0[0], v2[0]));
        int y0 = (int)lroundf(std::min(v0[1], v2[1])), y1 = (int)lroundf(std::max(v0[1], v2[1]));
        img.fill_rect(x + x0 * scale, y + y0 * scale, x + x1 * scale, y + y1 * scale, c);
    }
#else
    (void)img, (void)x, (void)y, (void)s, (void)c, (void)scale;
#endif
}

void draw_text_vertical(Image& img, int x, int y, const std::string& s, Rgb c, int scale) {
    int w = text_width(s, scale), h = text_height(s, scale);
    if (w <= 0 || h <= 0) return;
    Image tmp(w, h, PLOT_BACKGROUND);
    draw_text(tmp, 0, 0, s, c, scale);
    // (i, j) of the horizontal text goes to (j, w - 1 - i): a quarter turn to the left
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++)
            if (tmp.at(i, j) != PLOT_BACKGROUND) img.set(x + j, y + w - 1 - i, tmp.at(i, j));
}

// ---------------------------------------------------------------------------
// Ticks

std::string format_tick(double v) {
    if (v == 0) return "0";
    double a = std::fabs(v);
    if (a < 1e5 && a >= 1e-3) return strf("%.6g", v);
    int e = (int)std::floor(std::log10(a) + 1e-9);
    double m = v / std::pow(10.0, e);
    return strf(std::fabs(m - std::round(m)) < 1e-6 ? "%.0fe%d" : "%.3ge%d", m, e);
}

// A step of 1, 2 or 5 times a power of ten giving about `want` intervals over the range.
static double nice_step(double range, int want) {
    double raw = range / want, p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw) return m * p;
    return 10 * p;
}

struct Scale {
    bool log = false;
    double lo = 0, hi = 1;  // in axis units (log10 of the value on log axes)
    int p0 = 0, p1 = 1;     // pixels of lo and hi
    double to_pixel(double v) const {
        double u = log ? std::log10(v) : v;
        return p0 + (u - lo) / (hi - lo) * (p1 - p0);
    }
};

// The axis range and its ticks (values, not pixels).
static void axis_range(const Axis& ax, std::vector<double> values, bool include_zero, Scale& s,
                       std::vector<double>& ticks) {
    s.log = ax.log;
    std::vector<double> v;
    for (double x : values)
        if (std::isfinite(x) && (!ax.log || x > 0)) v.push_back(x);
    double lo = v.empty() ? (ax.log ? 1 : 0) : *std::min_element(v.begin(), v.end());
    double hi = v.empty() ? (ax.log ? 10 : 1) : *std::max_element(v.begin(), v.end());
    if (!std::isnan(ax.min)) lo = ax.min;
    if (!std::isnan(ax.max)) hi = ax.max;
    ticks.clear();
    if (ax.log) {
        double a = std::floor(std::log10(lo) + 1e-9), b = std::ceil(std::log10(hi) - 1e-9);
        if (b <= a) b = a + 1;
        s.lo = a, s.hi = b;
        if (!ax.ticks.empty()) {  // the given ticks, and the data's own range with a little room
            ticks = ax.ticks;
            double tl = std::log10(std::min(lo, *std::min_element(ticks.begin(), ticks.end())));
            double th = std::log10(std::max(hi, *std::max_element(ticks.begin(), ticks.end())));
            double pad = std::max(0.04 * (th - tl), 0.02);
            s.lo = tl - pad, s.hi = th + pad;
            return;
        }
        int every = (int)std::ceil((b - a) / 8.0);  // at most about 8 labelled decades
        for (double e = a; e <= b + 1e-9; e += every) {
            ticks.push_back(std::pow(10.0, e));
            if (b - a <= 2 && e < b)  // a short range: 2 and 5 within each decade too
                for (double m : {2.0, 5.0}) ticks.push_back(m * std::pow(10.0, e));
        }
        std::sort(ticks.begin(), ticks.end());
        return;
    }
    if (include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
    if (hi <= lo) hi = lo + 1;
    double step = nice_step(hi - lo, 5);
    s.lo = std::floor(lo / step + 1e-9) * step;
    s.hi = std::ceil(hi / step - 1e-9) * step;
    if (!std::isnan(ax.min)) s.lo = ax.min;
    if (!std::isnan(ax.max)) s.hi = ax.max;
    if (!ax.ticks.empty()) {
        ticks = ax.ticks;
        return;
    }
    for (double t = std::ceil(s.lo / step - 1e-9) * step; t <= s.hi + step * 1e-6; t += step)
        ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
}

// ---------------------------------------------------------------------------
// Drawing primitives

static void thick_pixel(Image& img, int x, int y, Rgb c, const PlotArea& clip, int width) {
    for (int dy = 0; dy < width; dy++)
        for (int dx = 0; dx < width; dx++) {
            int px = x + dx - width / 2, py = y + dy - width / 2;
            if (clip.contains(px, py)) img.set(px, py, c);
        }
}

// Bresenham; `dash` counts pixels across segments so a dashed polyline keeps its rhythm.
static void draw_line(Image& img, double fx0, double fy0, double fx1, double fy1, Rgb c, const PlotArea& clip,
                      bool dashed, int& dash, int width = 2) {
    int x0 = (int)std::lround(fx0), y0 = (int)std::lround(fy0), x1 = (int)std::lround(fx1), y1 = (int)std::lround(fy1);
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        if (!dashed || (dash++ / 8) % 2 == 0) thick_pixel(img, x0, y0, c, clip, width);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) err += dy, x0 += sx;
        if (e2 <= dx) err += dx, y0 += sy;
    }
}

// the edges of [x0, x1] x [y0, y1]
static void outline_rect(Image& img, int x0, int y0, int x1, int y1, Rgb c) {
    for (int x = x0; x <= x1; x++) img.set(x, y0, c), img.set(x, y1, c);
    for (int y = y0; y <= y1; y++) img.set(x0, y, c), img.set(x1, y, c);
}

static void draw_marker(Image& img, int cx, int cy, Rgb c, const PlotArea& clip, int r) {
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++)
            if (dx * dx + dy * dy <= r * r && clip.contains(cx + dx, cy + dy)) img.set(cx + dx, cy + dy, c);
}

// ---------------------------------------------------------------------------
// The chart

namespace {
struct LegendEntry {
    std::string label;
    Rgb color;
    int kind;  // 0 line, 1 dashed line, 2 box
};
}  // namespace

static const int LEGEND_SCALE = 2, LEGEND_SWATCH = 28, LEGEND_PAD = 8;

static int legend_width(const std::vector<LegendEntry>& entries) {
    int w = 0;
    for (const LegendEntry& e : entries) w = std::max(w, text_width(e.label, LEGEND_SCALE));
    return w + LEGEND_SWATCH + 3 * LEGEND_PAD;
}

// Inside the axes in the emptiest corner, or (outside) right of the axes at the top.
static void draw_legend(Image& img, const std::vector<LegendEntry>& entries, const PlotArea& a, bool outside) {
    if (entries.empty()) return;
    const int scale = LEGEND_SCALE, swatch = LEGEND_SWATCH, pad = LEGEND_PAD, row = text_height("Ag", scale) + 8;
    int w = legend_width(entries);
    int h = (int)entries.size() * row + pad;
    // the corner whose box covers the fewest drawn pixels
    int best = 0;
    long best_ink = -1;
    const PlotArea everywhere{0, 0, img.width - 1, img.height - 1};
    int xs[4] = {a.x0 + 10, a.x1 - 10 - w, a.x0 + 10, a.x1 - 10 - w};
    int ys[4] = {a.y0 + 10, a.y0 + 10, a.y1 - 10 - h, a.y1 - 10 - h};
    if (outside) xs[0] = a.x1 + 16, ys[0] = a.y0;
    for (int k = 0; k < (outside ? 1 : 4); k++) {
        long ink = 0;
        for (int y = ys[k]; y < ys[k] + h; y++)
            for (int x = xs[k]; x < xs[k] + w; x++)
                if (everywhere.contains(x, y)) ink += img.at(x, y) != PLOT_BACKGROUND && img.at(x, y) != PLOT_GRID;
        if (best_ink < 0 || ink < best_ink) best_ink = ink, best = k;
    }
    int x = xs[best], y = ys[best];
    img.fill_rect(x, y, x + w, y + h, PLOT_BACKGROUND);
    outline_rect(img, x, y, x + w - 1, y + h - 1, PLOT_GRID);
    for (size_t i = 0; i < entries.size(); i++) {
        const LegendEntry& e = entries[i];
        int cy = y + pad + (int)i * row + row / 2 - 4, sx = x + pad;
        if (e.kind == 2) img.fill_rect(sx, cy - 7, sx + swatch, cy + 7, e.color);
        else {
            int dash = 0;
            draw_line(img, sx, cy, sx + swatch, cy, e.color, everywhere, e.kind == 1, dash, 3);
        }
        draw_text(img, sx + swatch + pad, y + pad + (int)i * row, e.label, PLOT_INK, scale);
    }
}

Image render_chart(const Chart& c, PlotArea* area_out) {
    Image img(c.width, c.height);
    const bool bars = !c.categories.empty();
    const int label_scale = 2, tick_scale = 2;

    // data ranges
    std::vector<double> xs, ys;
    for (const LineSeries& s : c.lines) {
        xs.insert(xs.end(), s.x.begin(), s.x.end());
        ys.insert(ys.end(), s.y.begin(), s.y.end());
    }
    for (const RefLine& r : c.hlines) ys.push_back(r.y);
    for (const BoxMark& b : c.boxes) xs.push_back(b.x0), xs.push_back(b.x1), ys.push_back(b.y0), ys.push_back(b.y1);
    for (size_t k = 0; k < c.categories.size(); k++) {
        double stack = 0;
        for (const BarSeries& b : c.bars) {
            double v = k < b.values.size() ? b.values[k] : 0;
            stack += v;
            ys.push_back(c.stacked ? stack : v);
        }
    }
    Scale sx, sy;
    std::vector<double> xticks, yticks;
    if (!bars) axis_range(c.x, xs, false, sx, xticks);
    axis_range(c.y, ys, !c.y.log && c.y.from_zero, sy, yticks);

    // margins from the text they must hold
    int ytick_w = 0;
    for (double t : yticks) ytick_w = std::max(ytick_w, text_width(format_tick(t), tick_scale));
    int cat_h = 0;
    for (const std::string& s : c.categories) cat_h = std::max(cat_h, text_height(s, tick_scale));
    int xtick_h = bars ? cat_h : text_height("0", tick_scale);
    // legend entries, in drawing order: bars, reference lines, series
    std::vector<LegendEntry> legend;
    for (const BarSeries& b : c.bars)
        if (bars && !b.label.empty()) legend.push_back({b.label, b.color, 2});
    for (const BoxMark& b : c.boxes)
        if (!b.key.empty() && std::none_of(legend.begin(), legend.end(), [&](const LegendEntry& e) { return e.label == b.key; }))
            legend.push_back({b.key, b.color, 2});
    for (const RefLine& r : c.hlines)
        if (!r.label.empty()) legend.push_back({r.label, r.color, 1});
    for (const LineSeries& s : c.lines)
        if (!s.label.empty()) legend.push_back({s.label, s.color, s.dashed ? 1 : 0});
    // a title too wide for its scale gets a smaller one
    int title_scale = 3;
    while (title_scale > 1 && text_width(c.title, title_scale) > c.width - 20) title_scale--;
    int top = 16 + (c.title.empty() ? 0 : text_height(c.title, title_scale) + 16);
    int left = 16 + (c.y.label.empty() ? 0 : text_height(c.y.label, label_scale) + 12) + ytick_w + 10;
    int bottom = 16 + xtick_h + 10 + (c.x.label.empty() ? 0 : text_height(c.x.label, label_scale) + 12);
    int right = c.legend_outside && !legend.empty() ? legend_width(legend) + 32 : 30;
    PlotArea a{left, top, c.width - right, c.height - bottom};
    if (area_out) *area_out = a;
    sx.p0 = a.x0, sx.p1 = a.x1;
    sy.p0 = a.y1, sy.p1 = a.y0;  // y grows upwards

    // grid and y ticks
    for (double t : yticks) {
        int py = (int)std::lround(sy.to_pixel(t));
        for (int x = a.x0; x <= a.x1; x++) img.set(x, py, PLOT_GRID);
        std::string lab = format_tick(t);
        draw_text(img, a.x0 - 8 - text_width(lab, tick_scale), py - text_height(lab, tick_scale) / 2, lab, PLOT_INK,
                  tick_scale);
    }
    // x ticks (numeric axes only): labels are skipped where they would touch the previous one
    int last_right = -1000000;
    for (double t : xticks) {
        int px = (int)std::lround(sx.to_pixel(t));
        for (int y = a.y0; y <= a.y1; y++) img.set(px, y, PLOT_GRID);
        std::string lab = format_tick(t);
        int w = text_width(lab, tick_scale), lx = px - w / 2;
        if (lx > last_right + 12) {
            draw_text(img, lx, a.y1 + 10, lab, PLOT_INK, tick_scale);
            last_right = lx + w;
        }
    }

    // bars
    if (bars) {
        int n = (int)c.categories.size(), m = std::max<int>(1, (int)c.bars.size());
        double group = (double)(a.x1 - a.x0) / n;
        double bar_w = c.stacked ? group * 0.6 : group * 0.8 / m;
        for (int k = 0; k < n; k++) {
            double gx = a.x0 + k * group;
            const std::string& lab = c.categories[k];
            int lw = text_width(lab, tick_scale);
            draw_text(img, (int)(gx + group / 2 - lw / 2.0), a.y1 + 10, lab, PLOT_INK, tick_scale);
            double stack = 0;
            for (int j = 0; j < (int)c.bars.size(); j++) {
                const BarSeries& b = c.bars[j];
                double v = k < (int)b.values.size() ? b.values[k] : 0;
                if (!std::isfinite(v)) continue;
                double x0 = c.stacked ? gx + (group - bar_w) / 2 : gx + group * 0.1 + j * bar_w;
                double base = c.stacked ? stack : (sy.log ? std::pow(10.0, sy.lo) : 0);
                double top_v = c.stacked ? stack + v : v;
                if (c.stacked) stack += v;
                int py0 = (int)std::lround(sy.to_pixel(std::max(base, sy.log ? std::pow(10.0, sy.lo) : base)));
                int py1 = (int)std::lround(sy.to_pixel(top_v));
                int bx0 = (int)std::lround(x0) + 1, bx1 = (int)std::lround(x0 + bar_w) - 1;
                img.fill_rect(bx0, std::min(py0, py1), std::max(bx0 + 1, bx1), std::max(py0, py1) + 1, b.color);
            }
        }
    }
    // boxes, outlined, their labels centred at the largest scale that fits
    for (const BoxMark& b : c.boxes) {
        int x0 = (int)std::lround(sx.to_pixel(b.x0)), x1 = (int)std::lround(sx.to_pixel(b.x1));
        int y0 = (int)std::lround(sy.to_pixel(b.y1)), y1 = (int)std::lround(sy.to_pixel(b.y0));
        img.fill_rect(x0, y0, x1 + 1, y1 + 1, b.color);
        outline_rect(img, x0, y0, x1, y1, PLOT_INK);
        for (int scale = 2; scale >= 1 && !b.label.empty(); scale--)
            if (text_width(b.label, scale) + 4 <= x1 - x0 && text_height(b.label, scale) + 4 <= y1 - y0) {
                draw_text(img, (x0 + x1 - text_width(b.label, scale)) / 2, (y0 + y1 - text_height(b.label, scale)) / 2,
                          b.label, PLOT_INK, scale);
                break;
            }
    }
    // reference lines, then series
    for (const RefLine& r : c.hlines) {
        int dash = 0;
        double py = sy.to_pixel(r.y);
        draw_line(img, a.x0, py, a.x1, py, r.color, a, true, dash);
    }
    for (const LineSeries& s : c.lines) {
        std::vector<std::pair<double, double>> pts;
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); i++) {
            if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
            if ((sx.log && s.x[i] <= 0) || (sy.log && s.y[i] <= 0)) continue;
            pts.push_back({sx.to_pixel(s.x[i]), sy.to_pixel(s.y[i])});
        }
        int dash = 0;
        if (s.line)
            for (size_t i = 1; i < pts.size(); i++)
                draw_line(img, pts[i - 1].first, pts[i - 1].second, pts[i].first, pts[i].second, s.color, a, s.dashed,
                          dash);
        if (s.markers)
            for (auto& p : pts) draw_marker(img, (int)std::lround(p.first), (int)std::lround(p.second), s.color, a,
                            s.marker_radius);
    }
    // axes box
    outline_rect(img, a.x0, a.y0, a.x1, a.y1, PLOT_INK);
    draw_legend(img, legend, a, c.legend_outside);

    // title and axis labels
    if (!c.title.empty())
        draw_text(img, c.width / 2 - text_width(c.title, title_scale) / 2, 16, c.title, PLOT_INK, title_scale);
    if (!c.x.label.empty())
        draw_text(img, (a.x0 + a.x1) / 2 - text_width(c.x.label, label_scale) / 2,
                  c.height - 16 - text_height(c.x.label, label_scale), c.x.label, PLOT_INK, label_scale);
    if (!c.y.label.empty())
        draw_text_vertical(img, 16, (a.y0 + a.y1) / 2 - text_width(c.y.label, label_scale) / 2, c.y.label, PLOT_INK,
                           label_scale);
    return img;
}

Image tile_images(const std::vector<Image>& images, int columns, const std::string& title) {
    if (images.empty()) return Image(1, 1);
    // each column as wide as its widest image, each row as high as its highest
    int rows = ((int)images.size() + columns - 1) / columns, cols = std::min<int>(columns, (int)images.size());
    std::vector<int> col_w(cols, 0), row_h(rows, 0);
    for (size_t i = 0; i < images.size(); i++) {
        col_w[i % columns] = std::max(col_w[i % columns], images[i].width);
        row_h[i / columns] = std::max(row_h[i / columns], images[i].height);
    }
    int top = title.empty() ? 0 : text_height(title, 3) + 32;
    Image out(std::accumulate(col_w.begin(), col_w.end(), 0), std::accumulate(row_h.begin(), row_h.end(), top));
    if (!title.empty()) draw_text(out, out.width / 2 - text_width(title, 3) / 2, 16, title, PLOT_INK, 3);
    for (size_t i = 0; i < images.size(); i++) {
        int c = (int)(i % columns), r = (int)(i / columns);
        out.blit(images[i], std::accumulate(col_w.begin(), col_w.begin() + c, 0),
                 std::accumulate(row_h.begin(), row_h.begin() + r, top));
    }
    return out;
}

bool png_available() {
#ifdef ZERO_HAVE_STB
    return true;
#else
    return false;
#endif
}

bool write_png(const std::string& path, const Image& img) {
#ifdef ZERO_HAVE_STB
    if (stbi_write_png(path.c_str(), img.width, img.height, 3, img.rgb.data(), img.width * 3)) return true;
    fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
#else
    static bool told = false;
    if (!told) fprintf(stderr, "built without stb: no PNG\n");
    told = true;
    (void)path, (void)img;
    return false;
#endif
}

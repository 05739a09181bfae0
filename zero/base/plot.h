// Charts as PNG files, with no plotting library: lines (solid or dashed, with
// or without markers) on linear or log axes, horizontal reference lines,
// grouped or stacked bars over named categories, labelled boxes, ticks, grid,
// legend and title. Text is drawn with stb_easy_font's line-segment glyphs (no font
// files) and the image is written with stb_image_write (Debian's libstb-dev).
//
// Built without those two headers (no ZERO_HAVE_STB), charts still render,
// without text, and write_png() says once "built without stb: no PNG" and
// writes nothing: the CSVs beside every figure hold the numbers either way.
//
//   Chart c{.title = "memory per rank", .x = {.label = "ranks N", .log = true}};
//   c.lines.push_back({.label = "stage 1", .x = {1, 2, 4}, .y = {8, 6, 5}, .color = plot_color(0)});
//   write_png("mem.png", render_chart(c));
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

struct Rgb {
    uint8_t r = 0, g = 0, b = 0;
    bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
    bool operator!=(const Rgb& o) const { return !(*this == o); }
};
constexpr Rgb PLOT_BACKGROUND{255, 255, 255};
constexpr Rgb PLOT_INK{30, 30, 30};     // text, axes
constexpr Rgb PLOT_GRID{228, 228, 228};

// Ten distinct colours, for series i (cycling).
Rgb plot_color(int i);

// An RGB image, row-major, 3 bytes per pixel.
struct Image {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb;
    Image() = default;
    Image(int w, int h, Rgb background = PLOT_BACKGROUND);
    Rgb at(int x, int y) const;
    void set(int x, int y, Rgb c);                          // ignored outside the image
    void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // [x0, x1) x [y0, y1), clipped
    void blit(const Image& src, int x, int y);
};

// Text: scale s draws each font pixel as an s x s square. (x, y) is the top left
// of the text's box; '\n' starts a new line.
int text_width(const std::string& s, int scale);
int text_height(const std::string& s, int scale);
void draw_text(Image& img, int x, int y, const std::string& s, Rgb c, int scale);
// The same text turned a quarter left (reads bottom to top), its box's top left at (x, y).
void draw_text_vertical(Image& img, int x, int y, const std::string& s, Rgb c, int scale);
bool plot_text_available();  // false when built without stb_easy_font

// A series or line with an empty label has no legend entry; a series without
// points draws nothing but its legend entry (a key for a line style, say).
struct LineSeries {
    std::string label;
    std::vector<double> x, y;
    Rgb color;
    bool dashed = false;
    bool markers = true;   // a filled circle at every point
    bool line = true;      // joined by a line
    int marker_radius = 4; // larger markers under smaller ones show points that coincide
};

struct RefLine {  // horizontal, dashed, across the whole plot
    std::string label;
    double y = 0;
    Rgb color;
};

// A filled rectangle in data coordinates with its label inside when it fits (a
// timeline's slots, say); boxes of the same colour share one legend entry, `key`.
struct BoxMark {
    double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
    Rgb color;
    std::string label, key;
};

struct BarSeries {  // one value per category
    std::string label;
    std::vector<double> values;
    Rgb color;
};

struct Axis {
    std::string label;  // with its unit, e.g. "memory per rank (GB)"
    bool log = false;
    double min = NAN, max = NAN;  // NAN: from the data
    std::vector<double> ticks;    // empty: chosen from the range
    bool from_zero = true;        // a linear value axis reaches zero; false: it fits the data (a loss curve)
};

struct Chart {
    std::string title;
    Axis x, y;
    int width = 900, height = 560;
    std::vector<LineSeries> lines;
    std::vector<RefLine> hlines;
    std::vector<BoxMark> boxes;  // on numeric axes, under the lines
    // bar charts: the x axis is categorical, one group of bars per category
    std::vector<std::string> categories;
    std::vector<BarSeries> bars;
    bool stacked = false;  // bars on top of each other instead of side by side
    bool legend_outside = false;  // the legend right of the axes instead of in their emptiest corner
};

// The plot area (inside the axes) of a rendered chart, in pixels.
struct PlotArea {
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    bool contains(int x, int y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
};

Image render_chart(const Chart& c, PlotArea* area = nullptr);

// Several images on a grid, `columns` wide, under a title.
Image tile_images(const std::vector<Image>& images, int columns, const std::string& title);

// Writes img as a PNG. False, with one line on stderr the first time, when
// built without stb, or when the file cannot be written.
bool write_png(const std::string& path, const Image& img);
bool png_available();

// A value as a tick label: 0.5, 12, 1500, 1e9.
std::string format_tick(double v);

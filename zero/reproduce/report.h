// report.md, built section by section: headings, paragraphs, the figures'
// PNGs and their numbers as Markdown tables.
#pragma once

#include <string>
#include <vector>

#include "zero/base/common.h"

struct Report {
    std::string md;

    void heading(const std::string& title, int level = 2) { md += "\n" + std::string(level, '#') + " " + title + "\n\n"; }
    void para(const std::string& text) { md += text + "\n\n"; }
    void image(const std::string& png, const std::string& alt) { md += "![" + alt + "](" + png + ")\n\n"; }
    void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
        auto line = [&](const std::vector<std::string>& cells) {
            md += "|";
            for (const std::string& c : cells) md += " " + c + " |";
            md += "\n";
        };
        line(header);
        md += "|";
        for (size_t i = 0; i < header.size(); i++) md += "---|";
        md += "\n";
        for (const auto& r : rows) line(r);
        md += "\n";
    }
    void save(const std::string& path) const {
        FILE* f = open_file(path, "w");
        fwrite(md.data(), 1, md.size(), f);
        fclose(f);
    }
};

// printf's format of numbers, every one passed as a double (a count too: "%.0f").
template <typename... Numbers>
std::string fmt(const char* format, Numbers... v) {
    return strf(format, (double)v...);
}

// Plain CSV: a header row, then one row per record, fields without commas or
// quotes (numbers and short names). Written by the reproduction next to every
// figure, and read back by it from the trainer's reports.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "zero/base/common.h"

struct CsvTable {
    std::string path;
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;

    int column(const std::string& name) const {  // -1: none of that name
        auto it = std::find(header.begin(), header.end(), name);
        return it == header.end() ? -1 : (int)(it - header.begin());
    }
    const std::string& text(size_t row, const std::string& name) const {
        int c = column(name);
        CHECK(c >= 0, "%s has no column '%s'", path.c_str(), name.c_str());
        return rows[row][c];
    }
    double num(size_t row, const std::string& name) const {
        const std::string& t = text(row, name);
        char* end = nullptr;
        double v = strtod(t.c_str(), &end);
        CHECK(!t.empty() && *end == '\0', "%s row %zu: '%s' in column %s is not a number", path.c_str(), row + 2,
              t.c_str(), name.c_str());
        return v;
    }
};

inline std::vector<std::string> split_csv_line(std::string line) {
    line.erase(std::remove(line.begin(), line.end(), '\r'), line.end());
    return split_at(line, ',');
}

// Reads a CSV; every row must have the header's number of fields.
inline CsvTable read_csv_table(const std::string& path) {
    CsvTable t{.path = path};
    std::vector<std::string> lines = split_at(read_file_bytes(path), '\n');
    if (lines.back().empty()) lines.pop_back();  // the newline that ends the last row
    for (size_t i = 0; i < lines.size(); i++) {
        std::vector<std::string> fields = split_csv_line(lines[i]);
        if (t.header.empty()) t.header = fields;
        else {
            CHECK(fields.size() == t.header.size(), "%s line %zu: %zu fields, the header has %zu", path.c_str(), i + 1,
                  fields.size(), t.header.size());
            t.rows.push_back(fields);
        }
    }
    CHECK(!t.header.empty(), "%s is empty: a CSV needs a header row", path.c_str());
    return t;
}

// Collects a CSV row by row; save() writes it in one go.
struct CsvWriter {
    std::string path;
    std::string text;
    size_t columns;
    CsvWriter(std::string p, const std::vector<std::string>& header) : path(std::move(p)), columns(header.size()) {
        row(header);
    }
    void row(const std::vector<std::string>& fields) {
        CHECK(fields.size() == columns, "%s: a row of %zu fields, the header has %zu", path.c_str(), fields.size(),
              columns);
        for (size_t i = 0; i < fields.size(); i++) text += (i ? "," : "") + fields[i];
        text += "\n";
    }
    void save() const {
        FILE* f = open_file(path, "w");
        fwrite(text.data(), 1, text.size(), f);
        fclose(f);
    }
};

// Free text as one field: commas and newlines become semicolons.
inline std::string csv_field(std::string s) {
    for (char& ch : s)
        if (ch == ',' || ch == '\n') ch = ';';
    return s;
}

inline std::string csv_num(double v, const char* fmt = "%.6g") { return strf(fmt, v); }

// The strict JSON parser of zero/base/json.h: the value accessors and the
// recursive-descent parser behind parse_json.
#include "zero/base/json.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zero/base/common.h"

static const char* json_type_name(JsonValue::Type t) {
    switch (t) {
        case JsonValue::Type::Null: return "null";
        case JsonValue::Type::Bool: return "a boolean";
        case JsonValue::Type::Number: return "a number";
        case JsonValue::Type::String: return "a string";
        case JsonValue::Type::Array: return "an array";
        case JsonValue::Type::Object: return "an object";
    }
    return "?";
}

const char* JsonValue::type_name() const { return json_type_name(type_); }

void JsonValue::require(Type t) const {
    if (type_ != t) fail("%s: expected %s, found %s", where().c_str(), json_type_name(t), type_name());
}

bool JsonValue::as_bool() const { require(Type::Bool); return bool_; }
double JsonValue::as_number() const { require(Type::Number); return number_; }
const std::string& JsonValue::as_string() const { require(Type::String); return text_; }
const std::vector<JsonValue>& JsonValue::as_array() const { require(Type::Array); return array_; }
const std::vector<JsonMember>& JsonValue::members() const { require(Type::Object); return object_; }
const std::string& JsonValue::number_text() const { require(Type::Number); return text_; }

bool JsonValue::is_integer_in(long long lo, long long hi) const {
    if (type_ != Type::Number) return false;
    if (text_.find_first_of(".eE") == std::string::npos) {  // an integer literal: read it exactly
        errno = 0;
        char* end = nullptr;
        long long v = strtoll(text_.c_str(), &end, 10);
        return errno == 0 && *end == '\0' && v >= lo && v <= hi;
    }
    // 2.0, 1e3: integral doubles; beyond 2^53 a double cannot say which integer it was
    if (number_ != std::floor(number_) || std::fabs(number_) > 9007199254740992.0) return false;
    return number_ >= (double)lo && number_ <= (double)hi;
}

long long JsonValue::as_integer() const {
    require(Type::Number);
    if (!is_integer_in(LLONG_MIN, LLONG_MAX)) fail("%s: expected an integer, found %s", where().c_str(), text_.c_str());
    if (text_.find_first_of(".eE") == std::string::npos) return strtoll(text_.c_str(), nullptr, 10);
    return (long long)number_;
}

const JsonValue* JsonValue::find(const std::string& key) const {
    for (const JsonMember& m : members())
        if (m.key == key) return &m.value;
    return nullptr;
}

size_t JsonValue::size() const {
    if (type_ == Type::Object) return object_.size();
    return as_array().size();
}

const JsonValue& JsonValue::operator[](size_t i) const {
    const std::vector<JsonValue>& a = as_array();
    if (i >= a.size()) fail("%s: array index %zu out of range (size %zu)", where().c_str(), i, a.size());
    return a[i];
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += (char)cp;
    } else if (cp < 0x800) {
        out += (char)(0xC0 | (cp >> 6));
        out += (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += (char)(0xE0 | (cp >> 12));
        out += (char)(0x80 | ((cp >> 6) & 0x3F));
        out += (char)(0x80 | (cp & 0x3F));
    } else {
        out += (char)(0xF0 | (cp >> 18));
        out += (char)(0x80 | ((cp >> 12) & 0x3F));
        out += (char)(0x80 | ((cp >> 6) & 0x3F));
        out += (char)(0x80 | (cp & 0x3F));
    }
}

// The recursive-descent parser behind parse_json. At namespace scope, not in an
// anonymous namespace: JsonValue names ::JsonParser as the friend that fills it in.
class JsonParser {
  public:
    JsonParser(const std::string& text, const std::string& source) : s(text), src(source) {}

    JsonValue parse_document() {
        if (s.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3, col = 1;  // byte-order mark
        skip_ws();
        JsonValue v = parse_value(0);
        skip_ws();
        if (pos < s.size()) error("unexpected " + describe_here() + " after the JSON value");
        return v;
    }

  private:
    static constexpr int MAX_DEPTH = 256;
    const std::string& s;
    const std::string& src;
    size_t pos = 0;
    int line = 1, col = 1;

    [[noreturn]] void error_at(int l, int c, const std::string& what) {
        fail("%s:%d:%d: %s", src.c_str(), l, c, what.c_str());
    }
    [[noreturn]] void error(const std::string& what) { error_at(line, col, what); }

    // the next character, for messages: 'x', end of input, or a byte in hex
    std::string describe_here() const {
        if (pos >= s.size()) return "end of input";
        unsigned char c = (unsigned char)s[pos];
        char buf[32];
        if (c >= 0x20 && c < 0x7f) snprintf(buf, sizeof(buf), "'%c'", c);
        else if (c == '\n') snprintf(buf, sizeof(buf), "end of line");
        else snprintf(buf, sizeof(buf), "byte 0x%02X", c);
        return buf;
    }

    // Advances one byte, keeping line and column (UTF-8 continuation bytes do not
    // start a new column).
    void advance() {
        unsigned char c = (unsigned char)s[pos++];
        if (c == '\n') line++, col = 1;
        else if ((c & 0xC0) != 0x80) col++;
    }

    void skip_ws() {
        while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) advance();
    }

    JsonValue start_value(JsonValue::Type t) {
        JsonValue v;
        v.type_ = t;
        v.source_ = src;
        v.line_ = line;
        v.column_ = col;
        return v;
    }

    JsonValue parse_value(int depth) {
        if (pos >= s.size()) error("expected a value, found end of input");
        char c = s[pos];
        if (c == '{') return parse_object(depth);
        if (c == '[') return parse_array(depth);
        if (c == '"') {
            JsonValue v = start_value(JsonValue::Type::String);
            v.text_ = parse_string();
            return v;
        }
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        if (c == 't' || c == 'f' || c == 'n') return parse_literal();
        error("expected a value, found " + describe_here());
    }

    JsonValue parse_literal() {
        JsonValue v = start_value(JsonValue::Type::Null);
        static const char* const names[3] = {"true", "false", "null"};
        for (const char* name : names) {
            size_t n = strlen(name);
            if (s.compare(pos, n, name) != 0) continue;
            char after = pos + n < s.size() ? s[pos + n] : ' ';
            if (isalnum((unsigned char)after) || after == '_') break;  // "nullx", "true1"
            for (size_t i = 0; i < n; i++) advance();
            if (name[0] == 'n') return v;
            v.type_ = JsonValue::Type::Bool;
            v.bool_ = name[0] == 't';
            return v;
        }
        // name the whole bad word: "tru", "None", ...
        size_t end = pos;
        while (end < s.size() && end - pos < 32 && (isalnum((unsigned char)s[end]) || s[end] == '_')) end++;
        error("expected a value, found '" + s.substr(pos, end - pos) + "' (literals are true, false and null)");
    }

    JsonValue parse_number() {
        JsonValue v = start_value(JsonValue::Type::Number);
        size_t begin = pos;
        auto digit = [&]() { return pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; };
        if (s[pos] == '-') advance();
        if (!digit()) error("expected a digit after '-', found " + describe_here());
        if (s[pos] == '0') {
            advance();
            if (digit()) error_at(line, col - 1, "a number must not have a leading zero");
        } else {
            while (digit()) advance();
        }
        if (pos < s.size() && s[pos] == '.') {
            advance();
            if (!digit()) error("expected a digit after the decimal point, found " + describe_here());
            while (digit()) advance();
        }
        if (pos < s.size() && (s[pos] == 'e' || s[pos] == 'E')) {
            advance();
            if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) advance();
            if (!digit()) error("expected a digit in the exponent, found " + describe_here());
            while (digit()) advance();
        }
        v.text_ = s.substr(begin, pos - begin);
        // strtod reads '.' as the decimal point in the C locale, which is what a
        // program gets unless it calls setlocale
        v.number_ = strtod(v.text_.c_str(), nullptr);
        if (std::isinf(v.number_)) error_at(v.line_, v.column_, "number " + v.text_ + " is out of range");
        return v;
    }

    unsigned hex4() {
        unsigned u = 0;
        for (int i = 0; i < 4; i++) {
            if (pos >= s.size()) error("unterminated string: \\u needs four hex digits");
            char c = s[pos];
            int d = (c >= '0' && c <= '9') ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
            if (d < 0) error("\\u needs four hex digits, found " + describe_here());
            u = u * 16 + (unsigned)d;
            advance();
        }
        return u;
    }

    // Copies one raw (unescaped) UTF-8 character, checking it is well formed:
    // no stray continuation bytes, overlong forms, surrogates or code points
    // beyond U+10FFFF.
    void copy_utf8_char(std::string& out) {
        unsigned char c = (unsigned char)s[pos];
        int n;
        uint32_t cp, min;
        if (c < 0x80) n = 0, cp = c, min = 0;
        else if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
        else error("invalid UTF-8 (byte 0x" + hex_byte(c) + ")");
        for (int i = 1; i <= n; i++) {
            if (pos + i >= s.size()) error("invalid UTF-8: truncated character");
            unsigned char cc = (unsigned char)s[pos + i];
            if ((cc & 0xC0) != 0x80) error("invalid UTF-8 (byte 0x" + hex_byte(cc) + " inside a character)");
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            error("invalid UTF-8 (overlong form, surrogate or code point beyond U+10FFFF)");
        out.append(s, pos, (size_t)n + 1);
        for (int i = 0; i <= n; i++) advance();
    }

    static std::string hex_byte(unsigned char c) {
        char buf[4];
        snprintf(buf, sizeof(buf), "%02X", c);
        return buf;
    }

    // At the opening quote; returns the decoded string.
    std::string parse_string() {
        int l0 = line, c0 = col;
        advance();  // "
        std::string out;
        for (;;) {
            if (pos >= s.size()) error_at(l0, c0, "unterminated string");
            unsigned char c = (unsigned char)s[pos];
            if (c == '"') {
                advance();
                return out;
            }
            if (c == '\n') error_at(l0, c0, "unterminated string (a string cannot span lines; write \\n)");
            if (c < 0x20) error("control character 0x" + hex_byte(c) + " in a string (escape it)");
            if (c != '\\') {
                copy_utf8_char(out);
                continue;
            }
            int el = line, ec = col;
            advance();  // backslash
            if (pos >= s.size()) error_at(l0, c0, "unterminated string");
            char e = s[pos];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    advance();
                    uint32_t cp = hex4();
                    if (cp >= 0xDC00 && cp <= 0xDFFF)
                        error_at(el, ec, "lone low surrogate \\u" + hex4_text(cp) + " (it must follow a high one)");
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        if (s.compare(pos, 2, "\\u") != 0)
                            error_at(el, ec, "high surrogate \\u" + hex4_text(cp) + " is not followed by \\uDC00-\\uDFFF");
                        advance();
                        advance();
                        uint32_t lo = hex4();
                        if (lo < 0xDC00 || lo > 0xDFFF)
                            error_at(el, ec, "high surrogate \\u" + hex4_text(cp) + " is followed by \\u" +
                                                 hex4_text(lo) + ", not by \\uDC00-\\uDFFF");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    append_utf8(out, cp);
                    continue;  // hex4 advanced past the digits
                }
                default: {
                    std::string what = "invalid escape \\";
                    if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f) what += e;
                    else what += "(byte 0x" + hex_byte((unsigned char)e) + ")";
                    error_at(el, ec, what + " (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
                }
            }
            advance();
        }
    }

    static std::string hex4_text(uint32_t u) {
        char buf[8];
        snprintf(buf, sizeof(buf), "%04X", u);
        return buf;
    }

    void enter(int depth) {
        if (depth >= MAX_DEPTH) error("nesting deeper than " + std::to_string(MAX_DEPTH) + " levels");
    }

    JsonValue parse_array(int depth) {
        enter(depth);
        JsonValue v = start_value(JsonValue::Type::Array);
        advance();  // [
        skip_ws();
        if (pos < s.size() && s[pos] == ']') {
            advance();
            return v;
        }
        for (;;) {
            skip_ws();
            if (pos < s.size() && s[pos] == ']') error("trailing comma before ']'");
            v.array_.push_back(parse_value(depth + 1));
            skip_ws();
            if (pos >= s.size()) error_at(v.line_, v.column_, "unterminated array (no closing ']')");
            if (s[pos] == ',') {
                advance();
                continue;
            }
            if (s[pos] == ']') {
                advance();
                return v;
            }
            error("expected ',' or ']' in an array, found " + describe_here());
        }
    }

    JsonValue parse_object(int depth) {
        enter(depth);
        JsonValue v = start_value(JsonValue::Type::Object);
        advance();  // {
        skip_ws();
        if (pos < s.size() && s[pos] == '}') {
            advance();
            return v;
        }
        std::unordered_map<std::string, size_t> index;  // key -> member, to refuse duplicates in O(1)
        for (;;) {
            skip_ws();
            if (pos >= s.size()) error_at(v.line_, v.column_, "unterminated object (no closing '}')");
            if (s[pos] == '}') error("trailing comma before '}'");
            if (s[pos] != '"') error("expected a member name in double quotes, found " + describe_here());
            int kl = line, kc = col;
            std::string key = parse_string();
            auto seen = index.emplace(key, v.object_.size());
            if (!seen.second)
                error_at(kl, kc, ("duplicate key \"" + key + "\" (first at line " +
                                  std::to_string(v.object_[seen.first->second].value.line_) + ")"));
            skip_ws();
            if (pos >= s.size() || s[pos] != ':')
                error("expected ':' after member name \"" + key + "\", found " + describe_here());
            advance();
            skip_ws();
            JsonMember m;
            m.key = std::move(key);
            m.value = parse_value(depth + 1);
            v.object_.push_back(std::move(m));
            skip_ws();
            if (pos >= s.size()) error_at(v.line_, v.column_, "unterminated object (no closing '}')");
            if (s[pos] == ',') {
                advance();
                continue;
            }
            if (s[pos] == '}') {
                advance();
                return v;
            }
            error("expected ',' or '}' in an object, found " + describe_here());
        }
    }
};

JsonValue parse_json(const std::string& text, const std::string& source) {
    return JsonParser(text, source).parse_document();
}

JsonValue parse_json_file(const std::string& path) {
    FILE* f = open_file(path, "rb");
    std::string text;
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
    bool bad = ferror(f) != 0;
    fclose(f);
    CHECK(!bad, "cannot read %s", path.c_str());
    return parse_json(text, path);
}

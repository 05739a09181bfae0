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

static const char* json_type_name(JsonValue::Type t) {  // in the order of JsonValue::Type
    static const char* const names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[(int)t];
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

size_t JsonValue::size() const { return type_ == Type::Object ? object_.size() : as_array().size(); }

const JsonValue& JsonValue::operator[](size_t i) const {
    const std::vector<JsonValue>& a = as_array();
    if (i >= a.size()) fail("%s: array index %zu out of range (size %zu)", where().c_str(), i, a.size());
    return a[i];
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += (char)cp;
        return;
    }
    const int more = cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;  // continuation bytes
    static const uint8_t lead[4] = {0, 0xC0, 0xE0, 0xF0};
    out += (char)(lead[more] | (cp >> (6 * more)));
    for (int k = more - 1; k >= 0; k--) out += (char)(0x80 | ((cp >> (6 * k)) & 0x3F));
}

// The recursive-descent parser behind parse_json. At namespace scope, not in an
// anonymous namespace: JsonValue names ::JsonParser as the friend that fills it in.
class JsonParser {
  public:
    JsonParser(const std::string& text, const std::string& source, bool relaxed)
        : s(text), src(source), relaxed(relaxed) {}

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
    const bool relaxed;  // comments and trailing commas too
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
        if (c >= 0x20 && c < 0x7f) return strf("'%c'", c);
        return c == '\n' ? "end of line" : strf("byte 0x%02X", c);
    }

    // Advances one byte, keeping line and column (UTF-8 continuation bytes do not
    // start a new column).
    void advance() {
        unsigned char c = (unsigned char)s[pos++];
        if (c == '\n') line++, col = 1;
        else if ((c & 0xC0) != 0x80) col++;
    }

    void skip_ws() {
        for (;;) {
            while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) advance();
            if (!relaxed || pos >= s.size()) return;  // relaxed: then a comment to its end, if one starts here
            const bool block = s.compare(pos, 2, "/*") == 0;
            if (!block && s[pos] != '#' && s.compare(pos, 2, "//") != 0) return;
            const size_t end = block ? s.find("*/", pos + 2) : std::min(s.find('\n', pos), s.size());
            if (end == std::string::npos) error("unterminated /* comment");
            while (pos < end + (block ? 2 : 0)) advance();
        }
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
        // the whole word, so that "nullx" and "true1" are refused and "tru" or "None" named
        size_t end = pos;
        while (end < s.size() && end - pos < 32 && (isalnum((unsigned char)s[end]) || s[end] == '_')) end++;
        const std::string word = s.substr(pos, end - pos);
        if (word != "true" && word != "false" && word != "null")
            error("expected a value, found '" + word + "' (literals are true, false and null)");
        for (size_t i = 0; i < word.size(); i++) advance();
        if (word != "null") v.type_ = JsonValue::Type::Bool, v.bool_ = word == "true";
        return v;
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
            const char c = s[pos];
            if (!isxdigit((unsigned char)c)) error("\\u needs four hex digits, found " + describe_here());
            u = u * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
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
        else error(strf("invalid UTF-8 (byte 0x%02X)", c));
        for (int i = 1; i <= n; i++) {
            if (pos + i >= s.size()) error("invalid UTF-8: truncated character");
            unsigned char cc = (unsigned char)s[pos + i];
            if ((cc & 0xC0) != 0x80) error(strf("invalid UTF-8 (byte 0x%02X inside a character)", cc));
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            error("invalid UTF-8 (overlong form, surrogate or code point beyond U+10FFFF)");
        out.append(s, pos, (size_t)n + 1);
        for (int i = 0; i <= n; i++) advance();
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
            if (c < 0x20) error(strf("control character 0x%02X in a string (escape it)", c));
            if (c != '\\') {
                copy_utf8_char(out);
                continue;
            }
            int el = line, ec = col;
            advance();  // backslash
            if (pos >= s.size()) error_at(l0, c0, "unterminated string");
            char e = s[pos];
            // the one-character escapes, and what each stands for
            static const char escapes[] = "\"\\/bfnrt", meanings[] = "\"\\/\b\f\n\r\t";
            if (const char* k = e ? strchr(escapes, e) : nullptr) {
                out += meanings[k - escapes];
                advance();
                continue;
            }
            if (e != 'u') {
                std::string what = "invalid escape \\";
                if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f) what += e;
                else what += strf("(byte 0x%02X)", (unsigned char)e);
                error_at(el, ec, what + " (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
            }
            advance();
            uint32_t cp = hex4();  // (it advances past the digits)
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                error_at(el, ec, strf("lone low surrogate \\u%04X (it must follow a high one)", cp));
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (s.compare(pos, 2, "\\u") != 0)
                    error_at(el, ec, strf("high surrogate \\u%04X is not followed by \\uDC00-\\uDFFF", cp));
                advance();
                advance();
                uint32_t lo = hex4();
                if (lo < 0xDC00 || lo > 0xDFFF)
                    error_at(el, ec, strf("high surrogate \\u%04X is followed by \\u%04X, not by \\uDC00-\\uDFFF",
                                          cp, lo));
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(out, cp);
        }
    }

    // An array or an object, from its opening bracket: `element` parses one
    // element or member into `v`; commas between them, none after the last.
    template <typename Element>
    JsonValue parse_container(int depth, JsonValue::Type t, Element&& element) {
        if (depth >= MAX_DEPTH) error("nesting deeper than " + std::to_string(MAX_DEPTH) + " levels");
        const bool array = t == JsonValue::Type::Array;
        const char close = array ? ']' : '}', *kind = array ? "array" : "object";
        JsonValue v = start_value(t);
        advance();  // [ or {
        skip_ws();
        if (pos < s.size() && s[pos] == close) {
            advance();
            return v;
        }
        for (;;) {
            skip_ws();
            if (pos < s.size() && s[pos] == close) {
                if (!relaxed) error(strf("trailing comma before '%c'", close));
                advance();
                return v;
            }
            element(v);
            skip_ws();
            if (pos >= s.size()) error_at(v.line_, v.column_, strf("unterminated %s (no closing '%c')", kind, close));
            if (s[pos] == ',') {
                advance();
                continue;
            }
            if (s[pos] == close) {
                advance();
                return v;
            }
            error(strf("expected ',' or '%c' in an %s, found ", close, kind) + describe_here());
        }
    }

    JsonValue parse_array(int depth) {
        return parse_container(depth, JsonValue::Type::Array,
                               [&](JsonValue& v) { v.array_.push_back(parse_value(depth + 1)); });
    }

    JsonValue parse_object(int depth) {
        std::unordered_map<std::string, size_t> index;  // key -> member, to refuse duplicates in O(1)
        return parse_container(depth, JsonValue::Type::Object, [&](JsonValue& v) {
            if (pos >= s.size()) error_at(v.line_, v.column_, "unterminated object (no closing '}')");
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
            v.object_.push_back({std::move(key), parse_value(depth + 1)});
        });
    }
};

JsonValue parse_json(const std::string& text, const std::string& source, bool relaxed) {
    return JsonParser(text, source, relaxed).parse_document();
}

JsonValue parse_json_file(const std::string& path) { return parse_json(read_file_bytes(path), path); }

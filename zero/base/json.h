// A small, strict JSON parser (RFC 8259) for configuration files.
//
// What it accepts: objects, arrays, strings (escapes \" \\ \/ \b \f \n \r \t and
// \uXXXX, surrogate pairs combined into one code point, the text must be valid
// UTF-8), numbers in JSON's grammar (-0.5e-3 yes; 01, .5, 1., +1, NaN, Infinity
// no), true, false, null, with whitespace being space, tab, CR and LF. A UTF-8
// byte-order mark at the very start is skipped. Nothing else: no comments, no
// trailing commas, no duplicate keys in one object (DeepSpeed rejects those too),
// nothing but whitespace after the value, at most 256 levels of nesting.
// Relaxed (DeepSpeed's configs, which it reads with hjson): comments (#, //, /* */)
// and a comma after an array's or object's last element too.
//
// Errors are one line through fail(): "SOURCE:LINE:COLUMN: what was wrong", with
// the line and column (both from 1; columns count characters, not bytes) of the
// offending character.
//
// Every value remembers where it starts, so code that interprets a document can
// point at the value it rejects (JsonValue::where()).
//
// The definitions are in zero/base/json.cpp.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

struct JsonMember;

class JsonValue {
  public:
    enum class Type { Null, Bool, Number, String, Array, Object };

    Type type() const { return type_; }
    bool is_null() const { return type_ == Type::Null; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_number() const { return type_ == Type::Number; }
    bool is_string() const { return type_ == Type::String; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_object() const { return type_ == Type::Object; }
    // "null", "a boolean", "a number", "a string", "an array", "an object"
    const char* type_name() const;

    // The accessors end the program (fail()) when the value is of another type;
    // check the type first where the input decides it.
    bool as_bool() const;
    double as_number() const;
    const std::string& as_string() const;
    const std::vector<JsonValue>& as_array() const;
    const std::vector<JsonMember>& members() const;  // an object's members, in the document's order

    // A number's literal as written in the document ("-0.5e-3").
    const std::string& number_text() const;
    // Whether a number is an integer in [lo, hi] (2.0 and 2e0 are; 2.5 is not);
    // integers written without fraction or exponent are read exactly.
    bool is_integer_in(long long lo, long long hi) const;
    long long as_integer() const;  // a number with is_integer_in(LLONG_MIN, LLONG_MAX), else fail()

    // Object lookup: the member's value, or nullptr when absent (fail() if not an object).
    const JsonValue* find(const std::string& key) const;
    bool has(const std::string& key) const { return find(key) != nullptr; }
    // Elements of an array or members of an object (fail() for other types).
    size_t size() const;
    const JsonValue& operator[](size_t i) const;  // array element

    // Where the value starts in its document: "SOURCE:LINE:COLUMN".
    std::string where() const { return source_ + ":" + std::to_string(line_) + ":" + std::to_string(column_); }

  private:
    friend class JsonParser;  // the parser in zero/base/json.cpp
    void require(Type t) const;

    Type type_ = Type::Null;
    bool bool_ = false;
    double number_ = 0.0;
    std::string text_;  // a string's value or a number's literal
    std::vector<JsonValue> array_;
    std::vector<JsonMember> object_;
    std::string source_ = "<json>";
    int line_ = 0, column_ = 0;
};

struct JsonMember {
    std::string key;
    JsonValue value;
};

// Parses a whole document; `source` names it in error messages (a path, say).
JsonValue parse_json(const std::string& text, const std::string& source = "<json>", bool relaxed = false);
// Reads and parses a file (a missing or unreadable file is a one-line error too).
JsonValue parse_json_file(const std::string& path);

// Appends code point cp to out as UTF-8 (cp must be a valid scalar value).
void append_utf8(std::string& out, uint32_t cp);

// `s` as a JSON string, quoted, with what JSON must escape escaped (a file path may hold `"` or `\`).
inline std::string json_quoted(const std::string& s) {
    std::string q = "\"";
    for (unsigned char c : s) {
        char hex[8];
        snprintf(hex, sizeof hex, "\\u%04x", c);
        q += c == '"' || c == '\\' ? std::string("\\") + (char)c : c < 0x20 ? std::string(hex) : std::string(1, (char)c);
    }
    return q + "\"";
}

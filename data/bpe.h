// GPT-2's byte-level BPE encoder, reproducing the npm package gpt-3-encoder's
// Encoder.js token for token (that package is our test oracle; see
// dev/encode_reference.js and test/test_tokenizer.cpp).
//
// Pipeline for encode(text):
//   1. UTF-8 bytes -> code points. Invalid UTF-8 becomes U+FFFD, one per
//      "maximal subpart", exactly like the WHATWG decoder that node uses for
//      Buffer.toString('utf8') / TextDecoder. So a file with bad bytes encodes the
//      same as Encoder.js run on that file read as UTF-8 text. The consequence:
//      decode(encode(x)) == x only for valid UTF-8; otherwise it returns x with
//      each bad sequence replaced by EF BF BD. (Lone surrogates cannot arise:
//      their UTF-8 forms ED A0..BF xx are invalid and get replaced too.)
//   2. Pre-tokenization: the regex
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (JavaScript, u flag), hand-compiled into a scanner below; character
//      classes come from data/unicode_tables.h, generated from node's own engine.
//   3. Each piece's UTF-8 bytes are BPE-merged by rank and mapped to token ids.
//
// Implementation note: Encoder.js works on strings in GPT-2's "byte-unicode"
// alphabet (every byte shown as one printable character). That mapping is a
// per-byte bijection, so we run BPE directly on the raw bytes and translate
// encoder.json / vocab.bpe into raw bytes at load time. The one place where the
// alphabet could matter, the ',' used to join pair keys (below), maps to itself.
//
// Special tokens: none. "<|endoftext|>" in the text is encoded as ordinary text
// (as Encoder.js does); documents are separated by the caller inserting
// eot_token().
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/unicode_tables.h"
#include "zero/base/common.h"
#include "zero/base/json.h"

// ----------------------------------------------------------------------------
// small file / UTF-8 helpers

inline std::string read_file_bytes(const std::string& path) {
    FILE* f = open_file(path, "rb");
    std::string data(file_size(f), '\0');
    read_exact(f, data.data(), data.size(), path);
    fclose(f);
    return data;
}


constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes UTF-8 following the WHATWG Encoding Standard's decoder: each maximal
// invalid or truncated subsequence yields exactly one U+FFFD, and the byte that
// broke a sequence is examined again as a possible start byte. Returns the number
// of replacements made.
inline size_t decode_utf8_lossy(const std::string& in, std::vector<uint32_t>& cps) {
    cps.clear();
    cps.reserve(in.size());
    size_t replaced = 0;
    const size_t n = in.size();
    size_t i = 0;
    while (i < n) {
        const uint8_t b = (uint8_t)in[i];
        if (b < 0x80) {
            cps.push_back(b);
            ++i;
            continue;
        }
        int need;                            // continuation bytes still to come
        uint8_t lower = 0x80, upper = 0xBF;  // allowed range of the first continuation byte
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1, cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2, cp = b & 0x0F;
            if (b == 0xE0) lower = 0xA0;  // no overlongs
            if (b == 0xED) upper = 0x9F;  // no surrogates
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3, cp = b & 0x07;
            if (b == 0xF0) lower = 0x90;  // no overlongs
            if (b == 0xF4) upper = 0x8F;  // nothing above U+10FFFF
        } else {  // stray continuation byte, C0/C1 overlong lead, or F5..FF
            cps.push_back(kReplacementChar);
            ++replaced;
            ++i;
            continue;
        }
        size_t j = i + 1;
        bool ok = true;
        for (int k = 0; k < need; ++k, ++j) {
            if (j >= n || (uint8_t)in[j] < lower || (uint8_t)in[j] > upper) {
                ok = false;
                break;
            }
            cp = (cp << 6) | ((uint8_t)in[j] & 0x3F);
            lower = 0x80, upper = 0xBF;
        }
        if (ok) {
            cps.push_back(cp);
        } else {  // the bytes consumed so far are one maximal subpart; in[j] is looked at again
            cps.push_back(kReplacementChar);
            ++replaced;
        }
        i = j;
    }
    return replaced;
}

// ----------------------------------------------------------------------------
// GPT-2's pre-tokenizer

enum class CharClass : uint8_t { Letter, Number, Space, Other };

inline CharClass classify(uint32_t cp) {
    if (cp < 0x80) {  // fast path for ASCII
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CharClass::Letter;
        if (cp >= '0' && cp <= '9') return CharClass::Number;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::Space;
        return CharClass::Other;
    }
    if (is_unicode_letter(cp)) return CharClass::Letter;
    if (is_unicode_number(cp)) return CharClass::Number;
    if (is_js_space(cp)) return CharClass::Space;
    return CharClass::Other;
}

// Splits code points cps[0..n) into the regex's matches; returns the end index of
// each piece (pieces are contiguous and cover the input: every code point is
// matched by one of the alternatives, so the global regex never skips anything).
// The alternatives are tried in the regex's order at each position.
inline std::vector<size_t> pretokenize_ends(const std::vector<uint32_t>& cps) {
    const size_t n = cps.size();
    std::vector<CharClass> cls(n);
    for (size_t i = 0; i < n; ++i) cls[i] = classify(cps[i]);
    auto at = [&](size_t k) -> uint32_t { return k < n ? cps[k] : 0; };
    auto run_end = [&](size_t k, CharClass c) {
        while (k < n && cls[k] == c) ++k;
        return k;
    };

    std::vector<size_t> ends;
    size_t i = 0;
    while (i < n) {
        // 's|'t|'re|'ve|'m|'ll|'d  (ASCII apostrophe, lowercase only)
        if (cps[i] == '\'') {
            const uint32_t c1 = at(i + 1), c2 = at(i + 2);
            size_t len = 0;
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') len = 2;
            else if ((c1 == 'r' || c1 == 'v') && c2 == 'e') len = 3;
            else if (c1 == 'l' && c2 == 'l') len = 3;
            if (len) {
                ends.push_back(i += len);
                continue;
            }
        }
        // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional U+0020, then a
        // run of one class. The space is taken only if a run of that class follows;
        // otherwise ' ?' backtracks to empty and the run must start at i.
        const size_t k = (cps[i] == ' ' && i + 1 < n && cls[i + 1] != CharClass::Space) ? i + 1 : i;
        if (cls[k] != CharClass::Space) {
            ends.push_back(i = run_end(k, cls[k]));
            continue;
        }
        // Here cps[i] is whitespace. '\s+(?!\S)': the whitespace run minus its last
        // character when a non-space follows (backtracking one step suffices, as the
        // character left over is itself whitespace); the whole run at the end of the
        // input. A single whitespace character before a non-space fails that
        // alternative and is matched alone by '\s+'.
        const size_t j = run_end(i, CharClass::Space);
        if (j == n) ends.push_back(i = j);
        else if (j - i >= 2) ends.push_back(i = j - 1);
        else ends.push_back(i = j);
    }
    return ends;
}

// ----------------------------------------------------------------------------
// the byte <-> unicode alphabet of GPT-2's vocabulary files

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes ('!'..'~', 0xA1..0xAC,
// 0xAE..0xFF) stand for themselves; the other 68 bytes, in increasing order, are
// shown as U+0100, U+0101, ... (so e.g. the space 0x20 is 'Ġ' U+0120).
inline std::array<uint32_t, 256> byte_to_unicode_table() {
    std::array<uint32_t, 256> table{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        table[b] = printable ? b : next++;
    }
    return table;
}

// ----------------------------------------------------------------------------
// a minimal JSON reader for encoder.json: one flat object of string -> int



// Parses a JSON object whose values are all integers, e.g. {"a": 1, "\u0120b": 2}.
// Keys are returned in UTF-8, in file order.
inline std::vector<std::pair<std::string, long long>> parse_json_string_to_int(const std::string& text,
                                                                                const std::string& path) {
    JsonValue root = parse_json(text, path);
    CHECK(root.is_object(), "%s: expected a JSON object, found %s", path.c_str(), root.type_name());
    std::vector<std::pair<std::string, long long>> out;
    for (const JsonMember& m : root.members()) {
        CHECK(m.value.is_integer_in(INT_MIN, INT_MAX), "%s: expected an integer for \"%s\", found %s",
              m.value.where().c_str(), m.key.c_str(), m.value.is_number() ? m.value.number_text().c_str() : m.value.type_name());
        out.emplace_back(m.key, m.value.as_integer());
    }
    return out;
}

// ----------------------------------------------------------------------------
// the encoder

// Not thread-safe: encode() updates a cache. Use one Bpe per thread.
struct Bpe {
    // Loads encoder.json (token string -> id) and vocab.bpe (merge rules, best first).
    void load(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
        init_byte_alphabet();
        load_encoder(encoder_json_path);
        load_merges(vocab_bpe_path);
        cache_.clear();
    }

    int vocab_size() const { return (int)id_to_bytes_.size(); }
    // id of "<|endoftext|>", or -1 if encoder.json has no such token
    int eot_token() const { return eot_; }
    size_t num_merges() const { return num_merges_; }
    // The raw bytes that token `id` stands for (the byte-unicode mapping undone).
    const std::string& token_bytes(int id) const {
        CHECK(id >= 0 && id < vocab_size(), "token id %d is outside the vocabulary (0..%d)", id, vocab_size() - 1);
        return id_to_bytes_[id];
    }

    // Appends the tokens of `text` to `out`; returns how many invalid UTF-8
    // sequences were replaced by U+FFFD (see the top of this file).
    size_t encode(const std::string& text, std::vector<int>& out) {
        std::vector<uint32_t> cps;
        size_t replaced = decode_utf8_lossy(text, cps);
        // Re-encode: pieces are slices of the clean UTF-8, which equals `text`
        // whenever `text` was valid.
        std::string clean;
        clean.reserve(text.size() + 2 * replaced);
        std::vector<size_t> offset(cps.size() + 1);  // byte offset of each code point in `clean`
        for (size_t i = 0; i < cps.size(); ++i) {
            offset[i] = clean.size();
            append_utf8(clean, cps[i]);
        }
        offset[cps.size()] = clean.size();

        size_t start = 0;
        std::string piece;
        for (size_t end : pretokenize_ends(cps)) {
            piece.assign(clean, offset[start], offset[end] - offset[start]);
            encode_piece(piece, out);
            start = end;
        }
        return replaced;
    }
    std::vector<int> encode(const std::string& text) {
        std::vector<int> out;
        encode(text, out);
        return out;
    }

    // The bytes the tokens stand for; fails on an id outside the vocabulary.
    std::string decode(const std::vector<int>& ids) const {
        std::string out;
        for (int id : ids) out += token_bytes(id);
        return out;
    }

    // The pre-tokenizer's pieces of `text` in UTF-8 (for tests and debugging).
    static std::vector<std::string> pretokenize(const std::string& text) {
        std::vector<uint32_t> cps;
        decode_utf8_lossy(text, cps);
        std::vector<std::string> pieces;
        size_t start = 0;
        for (size_t end : pretokenize_ends(cps)) {
            std::string p;
            for (size_t i = start; i < end; ++i) append_utf8(p, cps[i]);
            pieces.push_back(std::move(p));
            start = end;
        }
        return pieces;
    }

   private:
    // A symbol of the word being merged: a slice [begin, begin+len) of the piece.
    // Merging only ever joins neighbours, so every symbol is such a slice.
    struct Span {
        uint32_t begin, len;
    };

    std::unordered_map<std::string, int> bytes_to_id_;  // raw token bytes -> id
    std::vector<std::string> id_to_bytes_;
    // Merge ranks keyed by first + "," + second (raw bytes), see rank_of().
    std::unordered_map<std::string, int> ranks_;
    size_t num_merges_ = 0;
    int eot_ = -1;
    std::array<uint32_t, 256> byte_to_cp_{};
    std::unordered_map<uint32_t, uint8_t> cp_to_byte_;
    // Piece -> its tokens. Encoder.js caches the same way; text repeats words a lot.
    std::unordered_map<std::string, std::vector<int>> cache_;
    static constexpr size_t kMaxCacheEntries = 1 << 20;  // bounds memory on huge inputs

    void init_byte_alphabet() {
        byte_to_cp_ = byte_to_unicode_table();
        cp_to_byte_.clear();
        for (int b = 0; b < 256; ++b) cp_to_byte_[byte_to_cp_[b]] = (uint8_t)b;
    }

    // A vocabulary string (UTF-8 in the byte-unicode alphabet) -> the raw bytes it stands for.
    std::string alphabet_to_bytes(const std::string& s, const std::string& path, const char* where) const {
        std::vector<uint32_t> cps;
        CHECK(decode_utf8_lossy(s, cps) == 0, "%s: %s is not valid UTF-8", path.c_str(), where);
        std::string out;
        for (uint32_t cp : cps) {
            auto it = cp_to_byte_.find(cp);
            CHECK(it != cp_to_byte_.end(), "%s: %s contains U+%04X, which is not in GPT-2's byte alphabet",
                  path.c_str(), where, cp);
            out += (char)it->second;
        }
        return out;
    }

    void load_encoder(const std::string& path) {
        auto entries = parse_json_string_to_int(read_file_bytes(path), path);
        CHECK(!entries.empty(), "%s: the vocabulary is empty", path.c_str());
        bytes_to_id_.clear();
        id_to_bytes_.assign(entries.size(), std::string());
        std::vector<bool> seen(entries.size(), false);
        eot_ = -1;
        for (auto& [token, id] : entries) {
            // Every id in 0..N-1 exactly once, so ids index a table and decode is total.
            CHECK(id >= 0 && id < (long long)entries.size() && !seen[id],
                  "%s: token ids must be 0..%zu, each once (bad id %lld)", path.c_str(), entries.size() - 1, id);
            seen[id] = true;
            std::string bytes = alphabet_to_bytes(token, path, "a token");
            CHECK(bytes_to_id_.emplace(bytes, (int)id).second, "%s: duplicate token (id %lld)", path.c_str(), id);
            id_to_bytes_[id] = std::move(bytes);
            if (token == "<|endoftext|>") eot_ = (int)id;
        }
    }

    // vocab.bpe, read the way Encoder.js (and GPT-2's original Python) reads it:
    // split on '\n', drop the first line (the "#version" comment) AND the last
    // element. With the usual trailing newline the last element is empty; a file
    // without one loses its final merge rule, exactly as in the reference.
    void load_merges(const std::string& path) {
        const std::string text = read_file_bytes(path);
        std::vector<std::string> lines;
        size_t start = 0;
        while (true) {
            size_t nl = text.find('\n', start);
            if (nl == std::string::npos) {
                lines.push_back(text.substr(start));
                break;
            }
            lines.push_back(text.substr(start, nl - start));
            start = nl + 1;
        }
        ranks_.clear();
        num_merges_ = 0;
        for (size_t i = 1; i + 1 < lines.size(); ++i) {
            std::vector<std::string> parts = split_on_ascii_space(lines[i]);
            // An empty line gives Encoder.js the key "", which no pair can ever
            // match; skipping it is equivalent. Anything but two symbols is corrupt.
            if (parts.empty()) continue;
            CHECK(parts.size() == 2, "%s: line %zu: expected two symbols separated by a space", path.c_str(), i + 1);
            char where[64];
            snprintf(where, sizeof(where), "line %zu", i + 1);
            std::string key = alphabet_to_bytes(parts[0], path, where) + "," + alphabet_to_bytes(parts[1], path, where);
            // Encoder.js builds its table by assignment, so a repeated key keeps the later rank.
            ranks_[key] = (int)(i - 1);
            ++num_merges_;
        }
    }

    // Encoder.js splits merge lines on /\s+/; the vocabulary's byte alphabet has no
    // whitespace characters at all (space, tab, newline, U+00A0, ... are all mapped
    // to U+01xx), so ASCII whitespace is the only kind a valid file can contain.
    static std::vector<std::string> split_on_ascii_space(const std::string& line) {
        std::vector<std::string> parts;
        std::string cur;
        for (char c : line) {
            if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
                if (!cur.empty()) parts.push_back(std::move(cur));
                cur.clear();
            } else {
                cur += c;
            }
        }
        if (!cur.empty()) parts.push_back(std::move(cur));
        return parts;
    }

    // Encoder.js keys its rank table with JavaScript arrays, which become strings
    // by joining with ',': the pair ("a", "b") is looked up as "a,b". Tokens can
    // contain commas, so some pairs that are NOT merge rules find a rank anyway,
    // e.g. ('",', '"') finds the rank of the rule ('"', ',"'), since both read
    // '",,"'. We key the same way so that we reproduce the reference even there.
    // (For GPT-2's vocabulary the merged result is the same string either way,
    // and a brute-force search over short punctuation strings found no input
    // whose tokens change; but matching the reference's rule costs nothing.)
    int rank_of(const std::string& piece, Span a, Span b, std::string& key) const {
        key.assign(piece, a.begin, a.len);
        key += ',';
        key.append(piece, b.begin, b.len);
        auto it = ranks_.find(key);
        return it == ranks_.end() ? INT_MAX : it->second;
    }

    static bool same(const std::string& piece, Span a, Span b) {
        return a.len == b.len && piece.compare(a.begin, a.len, piece, b.begin, b.len) == 0;
    }

    // BPE on one piece, the same loop as Encoder.js's bpe(): find the lowest-ranked
    // adjacent pair (on a tie between different pairs with one joined key, the
    // later pair, as its minPairs table keeps the last one written), then merge
    // every occurrence of that pair left to right; repeat until no pair has a rank.
    void merge_piece(const std::string& piece, std::vector<Span>& word) const {
        word.clear();
        for (uint32_t i = 0; i < piece.size(); ++i) word.push_back({i, 1});
        std::string key;
        std::vector<Span> merged;
        while (word.size() > 1) {
            int best_rank = INT_MAX;
            size_t best = 0;
            for (size_t i = 0; i + 1 < word.size(); ++i) {
                int r = rank_of(piece, word[i], word[i + 1], key);
                if (r != INT_MAX && r <= best_rank) best_rank = r, best = i;
            }
            if (best_rank == INT_MAX) break;
            const Span first = word[best], second = word[best + 1];
            merged.clear();
            for (size_t i = 0; i < word.size();) {
                if (i + 1 < word.size() && same(piece, word[i], first) && same(piece, word[i + 1], second)) {
                    merged.push_back({word[i].begin, word[i].len + word[i + 1].len});
                    i += 2;
                } else {
                    merged.push_back(word[i++]);
                }
            }
            word.swap(merged);
        }
    }

    void encode_piece(const std::string& piece, std::vector<int>& out) {
        auto hit = cache_.find(piece);
        if (hit != cache_.end()) {
            out.insert(out.end(), hit->second.begin(), hit->second.end());
            return;
        }
        std::vector<Span> word;
        merge_piece(piece, word);
        std::vector<int> ids;
        std::string sym;
        for (Span s : word) {
            sym.assign(piece, s.begin, s.len);
            auto it = bytes_to_id_.find(sym);
            // Cannot happen with a consistent vocabulary: single bytes and the results
            // of merge rules are all tokens. (Encoder.js would emit `undefined`.)
            CHECK(it != bytes_to_id_.end(), "BPE produced a symbol that is not in the vocabulary (%zu bytes)",
                  sym.size());
            ids.push_back(it->second);
        }
        out.insert(out.end(), ids.begin(), ids.end());
        if (cache_.size() >= kMaxCacheEntries) cache_.clear();
        cache_.emplace(piece, std::move(ids));
    }
};

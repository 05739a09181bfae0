// A fast 64-bit checksum for checkpoint files: not cryptographic, only good at
// telling a flipped bit, a torn write or a file from another run from the file
// that was written.
//
// The bytes are read as little-endian 64-bit words in stripes of four; each of
// four lanes absorbs its word with a multiply and a rotation, so the lanes run
// in parallel and a stripe costs four multiplies (several GB/s on one core).
// The tail (fewer than 32 bytes) is absorbed word by word, then byte by byte,
// and the length and every lane are folded into one value that a final
// xor-shift-multiply mix spreads over all 64 bits. Feeding the bytes in any
// chunking gives the same digest: Hasher64 buffers a partial stripe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

class Hasher64 {
  public:
    explicit Hasher64(uint64_t seed = 0) : lane{seed + K0 + K1, seed + K1, seed, seed - K0} {}

    void update(const void* data, size_t n) {
        const unsigned char* p = (const unsigned char*)data;
        total += n;
        if (held > 0) {  // finish the partial stripe first
            size_t take = n < STRIPE - held ? n : STRIPE - held;
            memcpy(buf + held, p, take);
            held += take, p += take, n -= take;
            if (held < STRIPE) return;
            absorb_stripe(buf);
            held = 0;
        }
        for (; n >= STRIPE; p += STRIPE, n -= STRIPE) absorb_stripe(p);
        memcpy(buf, p, n);
        held = n;
    }

    uint64_t digest() const {
        uint64_t h = total * K2;
        for (int i = 0; i < 4; i++) h = rotl(h ^ mix(lane[i]), 27) * K0 + K3;
        size_t i = 0;
        for (; i + 8 <= held; i += 8) h = rotl(h ^ (load64(buf + i) * K1), 31) * K0 + K3;
        for (; i < held; i++) h = rotl(h ^ (buf[i] * K2), 11) * K1;
        return mix(h);
    }

  private:
    static constexpr size_t STRIPE = 32;
    // odd constants with well-spread bits (the first is 2^64 / golden ratio)
    static constexpr uint64_t K0 = 0x9E3779B97F4A7C15ull, K1 = 0xD6E8FEB86659FD93ull,
                              K2 = 0xA0761D6478BD642Full, K3 = 0x589965CC75374CC3ull;

    static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
    static uint64_t load64(const unsigned char* p) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];  // little-endian on every host
        return v;
    }
    // every input bit reaches every output bit
    static uint64_t mix(uint64_t x) {
        x ^= x >> 31;
        x *= K1;
        x ^= x >> 29;
        x *= K2;
        x ^= x >> 32;
        return x;
    }
    void absorb_stripe(const unsigned char* p) {
        for (int i = 0; i < 4; i++) lane[i] = rotl(lane[i] + load64(p + 8 * i) * K1, 31) * K0;
    }

    uint64_t lane[4];
    unsigned char buf[STRIPE];
    size_t held = 0;
    uint64_t total = 0;
};

inline uint64_t hash64(const void* data, size_t n, uint64_t seed = 0) {
    Hasher64 h(seed);
    h.update(data, n);
    return h.digest();
}

// The size and checksum of a whole file; false if it cannot be read.
inline bool hash_file(const std::string& path, uint64_t& size, uint64_t& digest) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) return false;
    Hasher64 h;
    static thread_local std::string chunk(1 << 20, '\0');
    size = 0;
    size_t got;
    while ((got = fread(&chunk[0], 1, chunk.size(), f)) > 0) {
        h.update(chunk.data(), got);
        size += got;
    }
    bool ok = !ferror(f);
    fclose(f);
    digest = h.digest();
    return ok;
}

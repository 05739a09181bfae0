// The training / validation data loader: reads llm.c token shards and hands each
// rank its slice of every global micro-batch.
//
// Shard format (llm.c, little-endian): a header of 256 int32
//   [0] = 20240520 (magic), [1] = 1 (version), [2] = number of tokens N
// followed by N uint16 tokens. The file size must be exactly 1024 + 2*N.
//
// The global stream. With Bg = B*nranks sequences of T tokens per global
// micro-batch, shard s holds floor((N_s - 1) / (Bg*T)) batches; batch k of a
// shard starts at token k*Bg*T and its sequence i is tokens [k*Bg*T + i*T,
// k*Bg*T + i*T + T + 1) (inputs: the first T, targets: the last T). Rank r gets
// sequences [r*B, (r+1)*B) -- one contiguous run of B*T+1 tokens, read with a
// single fread. Batches never straddle shards; the tail of a shard that does not
// fill a batch is not used, and a shard with no full batch is skipped. After the
// last batch of the last shard the next epoch begins.
//
// Shuffling. With shuffle on, every epoch visits the shards in a permuted order
// and the batches of each shard in a permuted order. Both permutations are pure
// functions of (seed, epoch[, shard]) -- no rank, no world size -- so all ranks
// agree, their slices stay disjoint and covering, and the sequence of global
// batches depends only on Bg*T. That is what lets N emulated ranks reproduce a
// single rank with N times the batch, and a checkpoint resume at another world
// size continue the same stream.
//
// Gradient accumulation. With A micro-steps per optimizer step, a "batch" of
// the stream is one whole step: A*Bg*T tokens, contiguous in its shard, counted
// and shuffled as a unit; micro-step m of it is sequences [m*Bg, (m+1)*Bg). So
// the stream and a saved position depend only on the tokens per step.
//
// Memory: only the current batch (B*T+1 tokens) is held; the current shard's
// file stays open and each batch is one seek + fread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include <glob.h>

#include "zero/base/common.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards are little-endian; this host is not");

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int kShardHeaderInts = 256;
constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// Validates a shard's header and size; returns its number of tokens. Every
// problem is a one-line fatal error naming the file.
inline size_t read_shard_header(const std::string& path) {
    FILE* f = open_file(path, "rb");
    const size_t size = file_size(f);
    CHECK(size >= kShardHeaderBytes, "%s: truncated: %zu bytes, smaller than the %zu-byte header", path.c_str(),
          size, kShardHeaderBytes);
    int32_t header[kShardHeaderInts];
    read_exact(f, header, sizeof(header), path);
    fclose(f);
    CHECK(header[0] == kShardMagic, "%s: wrong magic %d (expected %d): not a token shard", path.c_str(), header[0],
          kShardMagic);
    CHECK(header[1] == kShardVersion, "%s: unsupported version %d (expected %d)", path.c_str(), header[1],
          kShardVersion);
    CHECK(header[2] >= 0, "%s: negative token count %d in the header", path.c_str(), header[2]);
    const size_t ntok = (size_t)header[2];
    const size_t held = (size - kShardHeaderBytes) / sizeof(uint16_t);
    CHECK(size >= kShardHeaderBytes + ntok * sizeof(uint16_t),
          "%s: truncated: header says %zu tokens but file holds %zu", path.c_str(), ntok, held);
    CHECK(size == kShardHeaderBytes + ntok * sizeof(uint16_t),
          "%s: size mismatch: header says %zu tokens but file holds %zu bytes of tokens (%zu extra)", path.c_str(),
          ntok, size - kShardHeaderBytes, size - kShardHeaderBytes - ntok * sizeof(uint16_t));
    return ntok;
}

// Writes a shard atomically (used by prepare_data and the tests).
inline void write_shard(const std::string& path, const uint16_t* tokens, size_t n) {
    CHECK(n <= (size_t)INT32_MAX, "%s: %zu tokens do not fit a shard header", path.c_str(), n);
    int32_t header[kShardHeaderInts] = {kShardMagic, kShardVersion, (int32_t)n};  // the rest zero
    AtomicFile out(path);
    out.write(header, sizeof(header));
    out.write(tokens, n * sizeof(uint16_t));
    out.commit();
}

// Files matching a glob(3) pattern, sorted by name; fails if there are none.
inline std::vector<std::string> glob_sorted(const std::string& pattern) {
    // glob(3) is not thread-safe and ranks may be threads that all init at once.
    static std::mutex glob_mutex;
    std::lock_guard<std::mutex> lock(glob_mutex);
    glob_t g{};
    int rc = glob(pattern.c_str(), 0, nullptr, &g);
    std::vector<std::string> files;
    if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);
    globfree(&g);
    CHECK(rc == 0 || rc == GLOB_NOMATCH, "cannot expand pattern %s (glob error %d)", pattern.c_str(), rc);
    CHECK(!files.empty(), "no files match pattern %s", pattern.c_str());
    std::sort(files.begin(), files.end());
    return files;
}

namespace dataloader_detail {

// SplitMix64: tiny, fully specified, so shuffles are identical on every platform
// (std::uniform_int_distribution is not specified bit-for-bit).
struct SplitMix64 {
    uint64_t state;
    static uint64_t mix(uint64_t z) {
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint64_t next() { return mix(state += 0x9e3779b97f4a7c15ull); }
    // uniform in [0, n), without modulo bias
    uint64_t below(uint64_t n) {
        const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
        while (true) {
            uint64_t r = next();
            if (r >= threshold) return r % n;
        }
    }
};

// A generator seeded by (seed, epoch, stream): one independent stream per use.
inline SplitMix64 stream(uint64_t seed, uint64_t epoch, uint64_t which) {
    using M = SplitMix64;
    return SplitMix64{M::mix(M::mix(M::mix(seed + 0x9e3779b97f4a7c15ull) ^ epoch) ^ which)};
}

// Fisher-Yates over 0..n-1.
inline std::vector<uint32_t> permutation(size_t n, SplitMix64 rng) {
    std::vector<uint32_t> p(n);
    std::iota(p.begin(), p.end(), 0u);
    for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
    return p;
}

constexpr uint64_t kShardOrderStream = ~0ull;  // batch-order streams use the shard's index

}  // namespace dataloader_detail

struct DataLoader {
    // Where the loader is in the global stream: enough to continue exactly. It
    // names the NEXT batch next_batch() will return. Independent of rank and
    // nranks. Plain uint64 fields so a checkpoint can store it as raw bytes.
    struct State {
        uint64_t epoch;           // epochs completed
        uint64_t shard;           // position in this epoch's shard order (usable shards only)
        uint64_t batch_in_shard;  // position in this shard's batch order
        uint64_t seed;            // shuffle seed (restore() adopts it)
        uint64_t batch_tokens;    // tokens per step (A*Bg*T) when saved; restore() requires the same
        uint64_t shuffle;         // 0/1 when saved; restore() requires the same
    };

    int* inputs = nullptr;   // B*T tokens, owned by the loader
    int* targets = nullptr;  // B*T tokens: inputs shifted by one

    DataLoader() = default;
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;
    ~DataLoader() { close_file(); }

    // pattern: glob(3) of shard files (sorted by name). Every shard is validated
    // here. Rank r of nranks gets sequences [r*B, (r+1)*B) of each global batch.
    // micro_steps: gradient accumulation, the micro-batches of one step (see the top).
    void init(const std::string& pattern, int B, int T, int rank, int nranks, bool shuffle, uint64_t seed,
              int micro_steps = 1) {
        CHECK(B > 0 && T > 0, "data loader: B and T must be positive (B=%d, T=%d)", B, T);
        CHECK(nranks > 0 && rank >= 0 && rank < nranks, "data loader: bad rank %d of %d", rank, nranks);
        CHECK(micro_steps > 0, "data loader: micro_steps must be positive (got %d)", micro_steps);
        close_file();
        pattern_ = pattern;
        B_ = B, T_ = T, rank_ = rank, nranks_ = nranks;
        shuffle_ = shuffle;
        seed_ = seed;
        micro_steps_ = micro_steps;
        batch_tokens_ = (size_t)B * nranks * T * micro_steps;

        shards_.clear();
        usable_.clear();
        total_batches_ = 0;
        for (const std::string& path : glob_sorted(pattern)) {
            Shard s{path, read_shard_header(path), 0};
            s.num_batches = s.num_tokens > batch_tokens_ ? (s.num_tokens - 1) / batch_tokens_ : 0;
            if (s.num_batches > 0) usable_.push_back(shards_.size());
            total_batches_ += s.num_batches;
            shards_.push_back(std::move(s));
        }
        CHECK(!usable_.empty(), "no shard matching %s has enough tokens for one batch: each needs at least %s = %zu",
              pattern.c_str(), micro_steps > 1 ? "micro-steps*B*nranks*T+1" : "B*nranks*T+1", batch_tokens_ + 1);

        buffer_.resize((size_t)B * T + 1);
        tokens_in_.resize((size_t)B * T);
        tokens_out_.resize((size_t)B * T);
        inputs = tokens_in_.data();
        targets = tokens_out_.data();
        reset();
    }

    // Tokens >= V would index past the embedding table: with V > 0, next_batch()
    // fails naming the file and position of any such token. 0 turns it off.
    void set_vocab_check(int V) { vocab_check_ = V; }

    // back to the first batch of epoch 0
    void reset() { seek_to_position(0, 0, 0); }

    // Fills inputs and targets with this rank's slice of the next global batch.
    void next_batch() {
        CHECK(!shards_.empty(), "data loader: next_batch() before init()");
        const size_t shard_index = current_shard_index();
        const Shard& shard = shards_[shard_index];
        const size_t k = shuffle_ ? batch_order_[batch_pos_] : batch_pos_;
        const size_t first_token = k * batch_tokens_ + ((size_t)micro_ * nranks_ + rank_) * B_ * T_;
        open_shard(shard_index);
        seek_to(file_, kShardHeaderBytes + first_token * sizeof(uint16_t), shard.path);
        read_exact(file_, buffer_.data(), buffer_.size() * sizeof(uint16_t), shard.path);
        if (vocab_check_ > 0) check_vocab(shard, first_token);
        std::copy(buffer_.begin(), buffer_.end() - 1, tokens_in_.begin());
        std::copy(buffer_.begin() + 1, buffer_.end(), tokens_out_.begin());
        if (++micro_ == micro_steps_) {  // the step's last micro-batch: on to the next step
            micro_ = 0;
            advance();
        }
    }

    // global micro-batches per epoch (the same on every rank): steps x micro-steps
    size_t num_batches() const { return total_batches_ * micro_steps_; }
    size_t num_shards() const { return usable_.size(); }  // shards with at least one batch

    // (between steps: a position inside a step is not a place to resume from)
    State state() const {
        CHECK(micro_ == 0, "data loader: state() in the middle of a step");
        return State{epoch_, shard_pos_, batch_pos_, seed_, batch_tokens_, shuffle_ ? 1u : 0u};
    }

    void restore(const State& s) {
        CHECK(!shards_.empty(), "data loader: restore() before init()");
        CHECK(s.batch_tokens == batch_tokens_,
              "cannot resume the data stream: it was saved with %llu tokens per step, this run has %zu "
              "(micro-steps x B x ranks x T)",
              (unsigned long long)s.batch_tokens, batch_tokens_);
        CHECK((s.shuffle != 0) == shuffle_,
              "cannot resume the data stream: it was saved with shuffle %s, this run has %s",
              s.shuffle ? "on" : "off", shuffle_ ? "on" : "off");
        CHECK(s.shard < usable_.size(),
              "cannot resume the data stream: saved shard position %llu, but %s has only %zu usable shards",
              (unsigned long long)s.shard, pattern_.c_str(), usable_.size());
        seed_ = s.seed;
        seek_to_position(s.epoch, s.shard, s.batch_in_shard);
    }

   private:
    struct Shard {
        std::string path;
        size_t num_tokens;
        size_t num_batches;
    };

    std::string pattern_;
    int B_ = 0, T_ = 0, rank_ = 0, nranks_ = 1;
    bool shuffle_ = false;
    uint64_t seed_ = 0;
    size_t batch_tokens_ = 0;  // one step: micro_steps * Bg*T
    int micro_steps_ = 1, micro_ = 0;  // micro-batches per step; the next one's index
    int vocab_check_ = 0;

    std::vector<Shard> shards_;   // every matching file, sorted by name
    std::vector<size_t> usable_;  // indices of shards with at least one batch
    size_t total_batches_ = 0;

    // position: the next batch is batch_order_[batch_pos_] of shard
    // shards_[usable_[shard_order_[shard_pos_]]] in epoch epoch_
    uint64_t epoch_ = 0, shard_pos_ = 0, batch_pos_ = 0;
    std::vector<uint32_t> shard_order_;  // this epoch's order of usable_ (identity without shuffle)
    std::vector<uint32_t> batch_order_;  // this shard's batch order (empty without shuffle)

    FILE* file_ = nullptr;
    size_t open_index_ = SIZE_MAX;
    std::vector<uint16_t> buffer_;
    std::vector<int> tokens_in_, tokens_out_;

    size_t current_shard_index() const { return usable_[shard_order_[shard_pos_]]; }

    // (at the start of a step)
    void seek_to_position(uint64_t epoch, uint64_t shard_pos, uint64_t batch_pos) {
        micro_ = 0;
        epoch_ = epoch;
        shard_pos_ = shard_pos;
        make_shard_order();
        make_batch_order();
        const Shard& shard = shards_[current_shard_index()];
        CHECK(batch_pos < shard.num_batches,
              "cannot resume the data stream: saved batch position %llu, but %s has only %zu batches",
              (unsigned long long)batch_pos, shard.path.c_str(), shard.num_batches);
        batch_pos_ = batch_pos;
    }

    void make_shard_order() {
        using namespace dataloader_detail;
        shard_order_.resize(usable_.size());
        if (shuffle_) shard_order_ = permutation(usable_.size(), stream(seed_, epoch_, kShardOrderStream));
        else std::iota(shard_order_.begin(), shard_order_.end(), 0u);
    }

    void make_batch_order() {
        using namespace dataloader_detail;
        batch_order_.clear();
        if (!shuffle_) return;
        const size_t index = current_shard_index();
        batch_order_ = permutation(shards_[index].num_batches, stream(seed_, epoch_, index));
    }

    void advance() {
        if (++batch_pos_ < shards_[current_shard_index()].num_batches) return;
        batch_pos_ = 0;
        if (++shard_pos_ == usable_.size()) {
            shard_pos_ = 0;
            ++epoch_;
            make_shard_order();
        }
        make_batch_order();
    }

    void open_shard(size_t index) {
        if (open_index_ == index) return;
        close_file();
        file_ = open_file(shards_[index].path, "rb");
        open_index_ = index;
    }

    void close_file() {
        if (file_) fclose(file_);
        file_ = nullptr;
        open_index_ = SIZE_MAX;
    }

    void check_vocab(const Shard& shard, size_t first_token) const {
        for (size_t i = 0; i < buffer_.size(); ++i)
            CHECK(buffer_[i] < vocab_check_, "%s: token %u at position %zu is outside the vocabulary (size %d)",
                  shard.path.c_str(), (unsigned)buffer_[i], first_token + i, vocab_check_);
    }
};

// The largest micro-batch (at most B) for which some validation shard holds one
// global batch of B*T*ranks+1 tokens; 0 if none does.
inline int validation_micro_batch(const std::string& pattern, int B, int T, int world) {
    size_t longest = 0;
    for (const std::string& path : glob_sorted(pattern)) longest = std::max(longest, read_shard_header(path));
    if (longest == 0) return B;  // no files: let the loader say so
    return (int)std::min<size_t>(B, (longest - 1) / ((size_t)T * world));
}

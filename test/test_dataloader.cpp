// The shard data loader (data/dataloader.h), on small shards written into the
// work directory. Every token's value encodes where it came from,
//   value = 1000 * shard + position  (shards here are < 1000 tokens),
// so a batch's first token tells exactly which shard and offset it was read from.
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "test/child_process.h"
#include "test/test_util.h"

namespace {

// ----------------------------------------------------------------------------
// helpers


uint16_t token_value(int shard, size_t pos) { return (uint16_t)(1000 * shard + pos); }

// Writes DIR/shard_XX.bin with n position-coded tokens.
std::string write_test_shard(const std::string& dir, int shard, size_t n) {
    std::vector<uint16_t> tokens(n);
    for (size_t i = 0; i < n; ++i) tokens[i] = token_value(shard, i);
    char name[64];
    snprintf(name, sizeof(name), "/shard_%02d.bin", shard);
    write_shard(dir + name, tokens.data(), n);
    return dir + name;
}

// A fresh directory of shards with the given sizes; returns its glob pattern.
std::string make_shards(const std::string& dir, const std::vector<size_t>& sizes) {
    make_dir(dir);
    for (size_t s = 0; s < sizes.size(); ++s) write_test_shard(dir, (int)s, sizes[s]);
    return dir + "/shard_*.bin";
}

// Where a batch came from, read off its first input token.
struct BatchId {
    int shard;
    size_t first;  // position of inputs[0] in its shard
    bool operator<(const BatchId& o) const { return shard != o.shard ? shard < o.shard : first < o.first; }
    bool operator==(const BatchId& o) const { return shard == o.shard && first == o.first; }
};
BatchId batch_id(const DataLoader& dl) { return {dl.inputs[0] / 1000, (size_t)dl.inputs[0] % 1000}; }

// True if the loader's current batch is the contiguous run of B*T+1 tokens of
// one shard starting at its first input (i.e. never straddles shards).
bool batch_is_contiguous(const DataLoader& dl, int B, int T) {
    const BatchId id = batch_id(dl);
    for (size_t i = 0; i < (size_t)B * T; ++i) {
        if (dl.inputs[i] != token_value(id.shard, id.first + i)) return false;
        if (dl.targets[i] != token_value(id.shard, id.first + i + 1)) return false;
    }
    return true;
}

std::vector<int> batch_tokens(const DataLoader& dl, int B, int T) {
    return std::vector<int>(dl.inputs, dl.inputs + (size_t)B * T);
}

// ----------------------------------------------------------------------------
// tests

// Sequential order, batch contents, shard boundaries, skipped short shards, epochs.
void test_sequential() {
    // Bg*T = 16: shard sizes 100 -> 6 batches (needs 16k+1 tokens), 16 -> 0 (one
    // token short), 50 -> 3, 17 -> 1 (exactly fits), 5 -> 0.
    const std::string pattern = make_shards("seq", {100, 16, 50, 17, 5});
    const int B = 2, T = 8;
    DataLoader dl;
    dl.init(pattern, B, T, 0, 1, false, 0);
    EXPECT_EQ(dl.num_batches(), 10u);
    EXPECT_EQ(dl.num_shards(), 3u);
    const std::vector<BatchId> want = {{0, 0}, {0, 16}, {0, 32}, {0, 48}, {0, 64}, {0, 80},
                                       {2, 0}, {2, 16}, {2, 32}, {3, 0}};
    for (int epoch = 0; epoch < 2; ++epoch) {
        for (size_t k = 0; k < want.size(); ++k) {
            EXPECT_EQ(dl.state().epoch, (uint64_t)epoch);
            dl.next_batch();
            EXPECT(batch_id(dl) == want[k], "epoch %d batch %zu: got shard %d pos %zu, want shard %d pos %zu", epoch,
                   k, batch_id(dl).shard, batch_id(dl).first, want[k].shard, want[k].first);
            EXPECT(batch_is_contiguous(dl, B, T), "epoch %d batch %zu is not one contiguous run", epoch, k);
        }
    }
    EXPECT_EQ(dl.state().epoch, 2u);
    // the last batch of the exactly-fitting shard ends with its last token as target
    EXPECT_EQ(dl.targets[B * T - 1], token_value(3, 16));

    dl.next_batch();
    dl.reset();
    EXPECT_EQ(dl.state().epoch, 0u);
    dl.next_batch();
    EXPECT(batch_id(dl) == want[0], "reset() goes back to the first batch");
}

// The global batch comes out the same for any nranks with the same Bg: the
// ranks' slices, in rank order, are the single-rank batch.
void test_rank_slices(bool shuffle) {
    const std::string pattern = make_shards(shuffle ? "ranks_shuffled" : "ranks", {300, 200, 49, 160, 97});
    const int Bg = 12, T = 4;
    DataLoader single;
    single.init(pattern, Bg, T, 0, 1, shuffle, 7);
    const size_t steps = 2 * single.num_batches() + 3;  // into a third epoch
    std::vector<std::vector<int>> want;
    for (size_t i = 0; i < steps; ++i) {
        single.next_batch();
        want.push_back(batch_tokens(single, Bg, T));
    }
    for (int nranks = 1; nranks <= 4; ++nranks) {
        const int B = Bg / nranks;
        std::vector<DataLoader> ranks(nranks);
        for (int r = 0; r < nranks; ++r) ranks[r].init(pattern, B, T, r, nranks, shuffle, 7);
        bool same = true;
        for (size_t i = 0; i < steps; ++i) {
            std::vector<int> got;
            for (int r = 0; r < nranks; ++r) {
                EXPECT_EQ(ranks[r].num_batches(), single.num_batches());
                ranks[r].next_batch();
                EXPECT(batch_is_contiguous(ranks[r], B, T), "nranks %d rank %d step %zu not contiguous", nranks, r, i);
                auto part = batch_tokens(ranks[r], B, T);
                got.insert(got.end(), part.begin(), part.end());
            }
            same = same && got == want[i];
        }
        EXPECT(same, "shuffle %d, nranks %d: the ranks' slices differ from the single-rank batches", shuffle, nranks);
    }
}

// Shuffling: deterministic in the seed, every batch of an epoch exactly once,
// a different order in each epoch, batches still within one shard.
void test_shuffle() {
    const std::string pattern = make_shards("shuffle", {400, 33, 250, 120, 330});
    const int B = 2, T = 8;  // Bg*T = 16
    auto epochs = [&](uint64_t seed, int n_epochs) {
        DataLoader dl;
        dl.init(pattern, B, T, 0, 1, true, seed);
        std::vector<std::vector<BatchId>> out(n_epochs);
        for (int e = 0; e < n_epochs; ++e)
            for (size_t i = 0; i < dl.num_batches(); ++i) {
                dl.next_batch();
                EXPECT(batch_is_contiguous(dl, B, T), "shuffled batch straddles or is out of order");
                out[e].push_back(batch_id(dl));
            }
        return out;
    };
    DataLoader seq;
    seq.init(pattern, B, T, 0, 1, false, 0);
    std::vector<BatchId> sequential;
    for (size_t i = 0; i < seq.num_batches(); ++i) {
        seq.next_batch();
        sequential.push_back(batch_id(seq));
    }
    std::vector<BatchId> all = sequential;
    std::sort(all.begin(), all.end());

    const auto a = epochs(42, 3), again = epochs(42, 3), other = epochs(43, 1);
    EXPECT(a == again, "the same seed must give the same order");
    EXPECT(a[0] != other[0], "another seed should give another order");
    EXPECT(a[0] != sequential, "shuffled order equals the sequential one");
    EXPECT(a[0] != a[1] && a[1] != a[2], "each epoch should have its own order");
    for (int e = 0; e < 3; ++e) {
        auto sorted = a[e];
        std::sort(sorted.begin(), sorted.end());
        EXPECT(sorted == all, "epoch %d is not a permutation of all batches", e);
    }
    // shard order is permuted too: the first batches of epochs come from various shards
    std::set<int> first_shards;
    for (uint64_t seed = 0; seed < 20; ++seed) first_shards.insert(epochs(seed, 1)[0][0].shard);
    EXPECT(first_shards.size() >= 3, "the shard order does not seem to be shuffled");
}

// state()/restore(): resume exactly, also at another nranks with the same Bg.
void test_resume(bool shuffle) {
    const std::string pattern = make_shards(shuffle ? "resume_shuffled" : "resume", {130, 64, 97, 20, 75});
    const int Bg = 6, T = 4;
    DataLoader ref;
    ref.init(pattern, Bg, T, 0, 1, shuffle, 99);
    const size_t steps = 3 * ref.num_batches();
    std::vector<DataLoader::State> states;
    std::vector<std::vector<int>> batches;
    for (size_t i = 0; i < steps; ++i) {
        states.push_back(ref.state());
        ref.next_batch();
        batches.push_back(batch_tokens(ref, Bg, T));
    }
    for (int nranks : {1, 2, 3}) {
        const int B = Bg / nranks;
        for (size_t cut = 0; cut < steps; cut += 5) {
            std::vector<DataLoader> ranks(nranks);
            bool same = true;
            for (int r = 0; r < nranks; ++r) {
                // a different init seed: restore() must adopt the saved one
                ranks[r].init(pattern, B, T, r, nranks, shuffle, 12345);
                ranks[r].next_batch();  // move somewhere else first
                ranks[r].restore(states[cut]);
            }
            for (size_t i = cut; i < std::min(steps, cut + 12); ++i) {
                std::vector<int> got;
                for (int r = 0; r < nranks; ++r) {
                    ranks[r].next_batch();
                    auto part = batch_tokens(ranks[r], B, T);
                    got.insert(got.end(), part.begin(), part.end());
                }
                same = same && got == batches[i];
            }
            EXPECT(same, "shuffle %d: restore at step %zu into nranks %d does not continue the stream", shuffle, cut,
                   nranks);
        }
    }
    const DataLoader::State saved = states[7];
    expect_failure("restore with another Bg*T",
                   [&] {
                       DataLoader dl;
                       dl.init(pattern, Bg, T + 1, 0, 1, shuffle, 99);
                       dl.restore(saved);
                   },
                   "tokens per step");
    expect_failure("restore with another shuffle setting",
                   [&] {
                       DataLoader dl;
                       dl.init(pattern, Bg, T, 0, 1, !shuffle, 99);
                       dl.restore(saved);
                   },
                   "shuffle");
}

void write_raw(const std::string& path, const std::vector<int32_t>& header, size_t n_tokens) {
    std::vector<int32_t> h(kShardHeaderInts, 0);
    std::copy(header.begin(), header.end(), h.begin());
    FILE* f = open_file(path, "wb");
    write_exact(f, h.data(), h.size() * sizeof(int32_t), path);
    std::vector<uint16_t> tokens(n_tokens, 1);
    write_exact(f, tokens.data(), tokens.size() * sizeof(uint16_t), path);
    fclose(f);
}

// Damaged or unsuitable files are rejected with one line naming file and problem.
void test_bad_files() {
    make_dir("bad");
    auto init_fails = [](const char* what, const std::string& pattern, const std::string& message) {
        expect_failure(what,
                       [&] {
                           DataLoader dl;
                           dl.init(pattern, 2, 4, 0, 1, false, 0);
                       },
                       message);
    };
    write_raw("bad/magic.bin", {20240521, 1, 100}, 100);
    init_fails("wrong magic", "bad/magic.bin", "bad/magic.bin: wrong magic");
    write_raw("bad/version.bin", {kShardMagic, 2, 100}, 100);
    init_fails("wrong version", "bad/version.bin", "bad/version.bin: unsupported version 2");
    write_raw("bad/truncated.bin", {kShardMagic, 1, 100}, 50);
    init_fails("truncated", "bad/truncated.bin",
               "bad/truncated.bin: truncated: header says 100 tokens but file holds 50");
    write_raw("bad/long.bin", {kShardMagic, 1, 100}, 101);
    init_fails("extra bytes", "bad/long.bin", "bad/long.bin: size mismatch");
    {
        FILE* f = open_file("bad/tiny.bin", "wb");
        write_exact(f, "abc", 3, "bad/tiny.bin");
        fclose(f);
    }
    init_fails("shorter than a header", "bad/tiny.bin", "bad/tiny.bin: truncated");
    init_fails("no match", "bad/nothing_*.bin", "no files match pattern bad/nothing_*.bin");
    // a damaged shard among good ones is still found at init
    make_shards("mixed", {100, 100});
    write_raw("mixed/shard_05.bin", {kShardMagic, 1, 100}, 99);
    init_fails("one bad shard", "mixed/shard_*.bin", "mixed/shard_05.bin: truncated");
    // shards that are all too short for a batch: B*nranks*T+1 = 2*4+1 = 9
    make_shards("short", {8, 3});
    init_fails("too short", "short/shard_*.bin", "at least B*nranks*T+1 = 9");
    expect_failure("bad rank",
                   [] {
                       DataLoader dl;
                       dl.init("seq/shard_*.bin", 2, 4, 3, 3, false, 0);
                   },
                   "bad rank 3 of 3");

    // tokens beyond the vocabulary are caught when read (value 1000*shard + pos)
    const std::string pattern = make_shards("vocab", {300});
    DataLoader ok;
    ok.set_vocab_check(301);
    ok.init(pattern, 2, 4, 0, 1, false, 0);
    for (size_t i = 0; i < ok.num_batches(); ++i) ok.next_batch();
    EXPECT(true, "tokens below the vocabulary size pass");
    expect_failure("token outside the vocabulary",
                   [&] {
                       DataLoader dl;
                       dl.init(pattern, 2, 4, 0, 1, false, 0);
                       dl.set_vocab_check(100);
                       for (size_t i = 0; i < dl.num_batches(); ++i) dl.next_batch();
                   },
                   "vocab/shard_00.bin: token 100 at position 100 is outside the vocabulary (size 100)");
}

}  // namespace

int main() {
    test_sequential();
    test_rank_slices(false);
    test_rank_slices(true);
    test_shuffle();
    test_resume(false);
    test_resume(true);
    test_bad_files();
    return test_summary("test_dataloader");
}

// The accounting allocator: every buffer of a rank comes from here, tagged with
// its kind and arena, so per-rank memory can be reported exactly (the homework's
// "memory after forward / backward / step") and checked against the predictor.
//
// Everything is allocated once at start-up (no allocation inside a step). Two
// numbers per kind:
//   reserved — bytes allocated, constant after start-up (what must fit);
//   live     — bytes of buffers currently holding something needed later, the
//              analogue of torch.cuda.memory_allocated(): activations are live
//              from forward until backward has consumed them, a stage-3 gathered
//              unit only while it is in use, gradients from backward until the
//              optimizer step.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "zero/base/backend.h"

enum class MemKind : int { Params, Grads, Optimizer, Activations, Scratch, Comm, COUNT };
// Disk: the NVMe offload's files (zero/engine/disk_states.h), counted here like memory.
enum class Arena : int { Device, Host, Disk, COUNT };
constexpr int NUM_MEM_KINDS = (int)MemKind::COUNT;
constexpr int NUM_ARENAS = (int)Arena::COUNT;

inline const char* mem_kind_name(MemKind k) {
    static const char* names[] = {"params", "grads", "optimizer", "activations", "scratch", "comm"};
    return names[(int)k];
}
inline const char* arena_name(Arena a) { return a == Arena::Device ? "device" : a == Arena::Host ? "host" : "disk"; }

struct MemCounts {
    size_t bytes[NUM_ARENAS][NUM_MEM_KINDS] = {};
    size_t total(Arena a) const { return std::accumulate(bytes[(int)a], bytes[(int)a] + NUM_MEM_KINDS, size_t(0)); }
    size_t& at(Arena a, MemKind k) { return bytes[(int)a][(int)k]; }
    size_t get(Arena a, MemKind k) const { return bytes[(int)a][(int)k]; }
};

class MemoryAccountant {
  public:
    struct Block {
        void* ptr;
        size_t bytes;
        MemKind kind;
        Arena arena;
        std::string name;
        bool live;
    };

    // In the CPU build's checking mode the rank's stream checker lives here:
    // the thread that makes the accountant is the rank's (zero/base/stream_check.h).
    explicit MemoryAccountant(int rank_) : rank(rank_), dry(dry_recorder() != nullptr) {
#ifndef ZERO_CUDA
        if (checking_mode()) {
            checker = std::make_unique<StreamChecker>(rank);
            outer_checker = tl_checker;
            tl_checker = checker.get();
        }
#endif
    }
    MemoryAccountant(const MemoryAccountant&) = delete;
    MemoryAccountant& operator=(const MemoryAccountant&) = delete;
    ~MemoryAccountant() {
        release_all();
        if (checker) tl_checker = outer_checker;
    }

    const int rank;

    // Zero-filled (padding must read as zero). `live` says whether the buffer
    // counts as live from the start (parameters and optimizer state do).
    // In a dry run (zero/base/ops.h) an address that holds nothing.
    void* allocate(size_t bytes, MemKind kind, Arena arena, const std::string& name, bool live) {
        if (bytes == 0) return nullptr;
        CHECK(arena != Arena::Disk, "internal: disk bytes are reserved (reserve_disk), not allocated");
        void* p = nullptr;
        if (dry_recorder()) {
            p = dry_recorder()->reserve(bytes, arena == Arena::Device, name);
        } else if (arena == Arena::Device) {
            p = device_malloc(bytes);
            device_zero(p, bytes, Stream{});
#ifdef ZERO_CUDA
            cudaCheck(cudaDeviceSynchronize());  // start-up only
#endif
        } else {
            p = host_malloc(bytes);
            memset(p, 0, bytes);
        }
        if (tl_recorder && !dry) tl_recorder->note(p, bytes, arena == Arena::Device, name);  // a capture
        index[p] = blocks.size();
        blocks.push_back({.ptr = p, .bytes = bytes, .kind = kind, .arena = arena, .name = name, .live = live});
        if (checker) checker->track(p, bytes, name);
        reserved.at(arena, kind) += bytes;
        if (live) add_live(arena, kind, bytes);
        return p;
    }

    template <typename T>
    T* allocate_array(size_t count, MemKind kind, Arena arena, const std::string& name, bool live) {
        return (T*)allocate(count * sizeof(T), kind, arena, name, live);
    }

    // Marks a buffer (by its base pointer) as holding data needed later, or
    // not. A release is a promise that nothing reads the buffer before it is
    // written again: checking mode poisons it (NaN), so a broken promise shows.
    void set_live(const void* p, bool is_live) {
        if (p == nullptr) return;
        auto it = index.find((void*)p);
        CHECK(it != index.end(), "internal: set_live on a pointer the accountant did not allocate");
        Block& b = blocks[it->second];
        if (b.live == is_live) return;
        b.live = is_live;
        if (is_live) add_live(b.arena, b.kind, b.bytes);
        else live.at(b.arena, b.kind) -= b.bytes;
        if (checker && !is_live && !dry_recorder()) StreamChecker::poison(b.ptr, b.bytes);
    }

    // Bytes of a file on disk (the NVMe offload's), live from now to the end.
    void reserve_disk(size_t bytes, MemKind kind, const std::string& name) {
        blocks.push_back({.ptr = nullptr, .bytes = bytes, .kind = kind, .arena = Arena::Disk, .name = name, .live = true});
        reserved.at(Arena::Disk, kind) += bytes;
        add_live(Arena::Disk, kind, bytes);
    }

    const MemCounts& reserved_bytes() const { return reserved; }
    const MemCounts& live_bytes() const { return live; }
    size_t peak_live(Arena a) const { return peak[(int)a]; }
    void reset_peak() {
        for (int a = 0; a < NUM_ARENAS; a++) peak[a] = live.total((Arena)a);
    }

    void release_all() {
        for (Block& b : blocks) {
            if (checker) checker->untrack(b.ptr);
            if (dry || b.arena == Arena::Disk) continue;  // (nothing was allocated)
            if (b.arena == Arena::Device) device_free(b.ptr);
            else host_free(b.ptr);
        }
        blocks.clear();
        index.clear();
        reserved = MemCounts{};
        live = MemCounts{};
    }

  private:
    void add_live(Arena a, MemKind k, size_t bytes) {
        live.at(a, k) += bytes;
        peak[(int)a] = std::max(peak[(int)a], live.total(a));
    }

    const bool dry;                          // made in a dry run: its addresses hold nothing
    std::unique_ptr<StreamChecker> checker;  // checking mode only
    StreamChecker* outer_checker = nullptr;  // the thread's checker before this one
    std::vector<Block> blocks;
    std::unordered_map<void*, size_t> index;
    MemCounts reserved, live;
    size_t peak[NUM_ARENAS] = {};
};

// The shard plan: all of ZeRO's bookkeeping as offset arithmetic over one flat
// parameter buffer. Pure and host-only; it knows nothing about GPT-2 (the units
// and their tensors come from zero/layout/param_layout.h) and nothing about devices.
//
// Unit u is padded to P(u), a multiple of nranks * align; rank r's slice of it
// is [F(u) + r*P(u)/N, F(u) + (r+1)*P(u)/N) of the full buffer and [S(u),
// S(u) + P(u)/N) of its shard (F, S: zero/README.md, "Words"). A unit's
// all-gather puts every rank's slice into [F(u), F(u)+P(u)) in rank order,
// NCCL's layout; reduce-scatter is the reverse.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "zero/base/common.h"

// Slices are multiples of this many elements (64 bytes of fp32), so every
// rank's part of every unit starts aligned for vector loads. Checkpoints record
// slices under this alignment.
constexpr size_t SHARD_ALIGN = 16;

// ZeRO's three choices (zero/README.md, "A worked example"), named once: a
// stage is how many of them it makes, in this order. The engine branches on
// the names, never on the stage's number.
struct Sharded {
    bool states;  // each rank keeps and updates only its slices of fp32 master, m, v (stages 1-3)
    bool grads;   // a unit's gradient lives in a slot while backward builds it and is reduce-scattered into
                  // the rank's gradient shard every micro-step (stages 2-3); else a whole buffer, reduced once
    bool params;  // each rank keeps only its slices of the compute-dtype parameters, gathered into a slot
                  // around each use (stage 3); else every parameter, all-gathered after each step (stages 1-2)
};
inline Sharded sharded_at(int stage) { return {stage >= 1, stage >= 2, stage >= 3}; }

// One tensor inside a unit, as the model describes it.
struct TensorSpec {
    int id;                 // the model's tensor identifier (opaque here)
    int layer;              // which copy of the tensor (e.g. transformer layer); opaque here
    size_t offset_in_unit;  // first element, relative to the unit's start
    size_t numel;
};

struct UnitSpec {
    std::string name;
    size_t numel;                      // real elements, including any alignment gaps between tensors
    std::vector<TensorSpec> tensors;   // sorted by offset, non-overlapping, inside [0, numel)
};

// A run of the elements NVMe offload keeps on disk (ShardPlan::disk_split):
// [offset, offset + n) from the disk range's first element.
struct DiskTile {
    size_t offset, n;
};

// The part of one tensor that falls in one rank's slice: where it is in the full
// buffer, in the unit, and in the rank's shard. The optimizer walks these.
struct ShardPiece {
    int unit;
    int tensor_id, layer;
    size_t full_offset;   // in the full flat buffer
    size_t shard_offset;  // in the owning rank's shard
    size_t numel;
};

struct ShardPlan {
    int nranks = 1;
    size_t align = 1;  // elements; every slice is a multiple of this
    std::vector<UnitSpec> units;
    std::vector<size_t> padded;        // P(u)
    std::vector<size_t> full_offset;   // F(u)
    std::vector<size_t> shard_offset;  // S(u)
    size_t full_numel = 0;             // sum P(u): the full buffer
    size_t shard_numel = 0;            // sum P(u)/N: one rank's shard
    size_t real_numel = 0;             // sum numel(u): the model's parameters (Psi)

    ShardPlan() = default;
    ShardPlan(std::vector<UnitSpec> unit_specs, int world, size_t align_elems)
        : nranks(world), align(align_elems), units(std::move(unit_specs)) {
        for (const UnitSpec& u : units) {
            size_t p = round_up(u.numel == 0 ? 1 : u.numel, (size_t)nranks * align);
            padded.push_back(p);
            full_offset.push_back(full_numel);
            shard_offset.push_back(shard_numel);
            full_numel += p;
            shard_numel += p / nranks;
            real_numel += u.numel;
        }
    }

    int num_units() const { return (int)units.size(); }
    size_t slice_numel(int u) const { return padded[u] / nranks; }

    // rank r's slice of unit u, in the full buffer
    size_t slice_full_offset(int u, int r) const { return full_offset[u] + (size_t)r * slice_numel(u); }

    // how many real (non-padding) elements rank r's slice of unit u holds
    size_t slice_real_numel(int u, int r) const {
        size_t begin = (size_t)r * slice_numel(u), end = begin + slice_numel(u);
        size_t n = units[u].numel;
        return begin >= n ? 0 : std::min(end, n) - begin;
    }

    // Full-buffer offset -> (owning rank, offset in that rank's shard).
    int owner_of(size_t full_off) const {
        int u = unit_of(full_off);
        return (int)((full_off - full_offset[u]) / slice_numel(u));
    }
    size_t full_to_shard(size_t full_off) const {
        int u = unit_of(full_off);
        size_t in_unit = full_off - full_offset[u];
        return shard_offset[u] + in_unit % slice_numel(u);
    }
    size_t shard_to_full(int r, size_t shard_off) const {
        int u = unit_of_shard(shard_off);
        return slice_full_offset(u, r) + (shard_off - shard_offset[u]);
    }
    int unit_of(size_t full_off) const {
        return (int)(std::upper_bound(full_offset.begin(), full_offset.end(), full_off) - full_offset.begin()) - 1;
    }
    int unit_of_shard(size_t shard_off) const {
        return (int)(std::upper_bound(shard_offset.begin(), shard_offset.end(), shard_off) - shard_offset.begin()) - 1;
    }
    size_t largest_slice() const {
        size_t m = 0;
        for (int u = 0; u < num_units(); u++) m = std::max(m, slice_numel(u));
        return m;
    }

    // The pieces of every tensor that rank r owns, in shard order. Padding is in
    // no piece, so it is never updated and stays zero.
    std::vector<ShardPiece> pieces_of_rank(int r) const { return pieces_of(r); }
    // Every tensor's whole extent in the full buffer (what stage 0 updates: a DDP
    // rank owns everything). shard_offset equals full_offset here.
    std::vector<ShardPiece> pieces_full() const { return pieces_of(-1); }
    // r >= 0: rank r's pieces; -1: the whole units' (each unit one slice, at its full offset)
    std::vector<ShardPiece> pieces_of(int r) const {
        std::vector<ShardPiece> out;
        for (int u = 0; u < num_units(); u++) {
            size_t begin = r < 0 ? 0 : (size_t)r * slice_numel(u), end = r < 0 ? padded[u] : begin + slice_numel(u);
            size_t at = r < 0 ? full_offset[u] : shard_offset[u];  // where the slice starts
            for (const TensorSpec& t : units[u].tensors) {
                size_t lo = std::max(begin, t.offset_in_unit), hi = std::min(end, t.offset_in_unit + t.numel);
                if (lo < hi)
                    out.push_back({.unit = u, .tensor_id = t.id, .layer = t.layer, .full_offset = full_offset[u] + lo,
                                   .shard_offset = at + (lo - begin), .numel = hi - lo});
            }
        }
        return out;
    }

    // NVMe offload's share of a rank's fp32 states (zero/engine/disk_states.h):
    // the last units' slices, as many as keep the disk's share of the shard at
    // most `fraction` (whole units: a unit's AdamW reads its states from one
    // place), each cut into tiles of at most `tile` elements, the unit the CPU
    // AdamW updates and the disk moves at a time. Shard offsets [begin,
    // shard_numel) are on disk, tile t at begin + tiles[t].offset.
    struct DiskSplit {
        int first_unit = 0;            // units first_unit.. are on disk
        size_t begin = 0;              // their first shard offset: the host keeps [0, begin)
        std::vector<DiskTile> tiles;   // in shard order
        std::vector<int> first_tile;   // (units + 1): unit u's tiles are first_tile[u] .. first_tile[u + 1]
        size_t largest_tile() const {
            size_t n = 0;
            for (const DiskTile& t : tiles) n = std::max(n, t.n);
            return n;
        }
    };
    DiskSplit disk_split(double fraction, size_t tile) const {
        DiskSplit d{.first_unit = num_units()};
        size_t on_disk = 0;
        while (d.first_unit > 0 && on_disk + slice_numel(d.first_unit - 1) <= fraction * (double)shard_numel)
            on_disk += slice_numel(--d.first_unit);
        d.begin = shard_numel - on_disk;
        d.first_tile.assign(num_units() + 1, 0);
        for (int u = 0; u < num_units(); u++) {
            d.first_tile[u] = (int)d.tiles.size();
            if (u < d.first_unit) continue;
            for (size_t at = 0; at < slice_numel(u); at += tile)
                d.tiles.push_back({shard_offset[u] - d.begin + at, std::min(tile, slice_numel(u) - at)});
        }
        d.first_tile[num_units()] = (int)d.tiles.size();
        return d;
    }

    // Empty when the world size fits the plan; otherwise a one-line explanation.
    // A world larger than some unit's element count cannot give every rank a part
    // of that unit however it is cut, so it is refused. (Alignment alone may leave
    // a rank's slice of a small unit all padding; that is harmless.)
    std::string validate() const {
        for (int u = 0; u < num_units(); u++)
            if ((size_t)nranks > units[u].numel)
                return "world size " + std::to_string(nranks) + " is larger than unit '" + units[u].name + "' (" +
                       std::to_string(units[u].numel) + " elements): some rank would own none of it";
        return "";
    }
};

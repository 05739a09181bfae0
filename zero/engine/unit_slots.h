// Unit-sized buffers that hold one unit at a time: stage 3's gathered parameters
// and stages 2-3's in-flight gradients. There is a slot for the embeddings unit
// (the largest, and the one the tied LM head needs again) and two for the other
// units, so one can be in use while the next is filled.
//
// Each slot carries two events: `ready` (its contents are complete) and `free`
// (the last reader is done). Whoever fills a slot waits for `free`; whoever
// reads it waits for `ready`. On the CPU build events are no-ops and everything
// happens in program order.
#pragma once

#include <string>
#include <vector>

#include "zero/base/backend.h"
#include "zero/base/memory.h"
#include "zero/layout/shard_plan.h"

template <typename T>
struct UnitSlot {
    T* ptr = nullptr;
    int unit = -1;        // the unit it holds, or -1
    bool in_use = false;  // handed out and not yet released
    Event ready{}, free{};
};

template <typename T>
class UnitSlots {
  public:
    // slot 0 holds unit 0 (embeddings), slots 1..2 any other unit
    UnitSlots(const ShardPlan& plan, MemoryAccountant& mem, MemKind kind, const std::string& name) {
        size_t other = 0;
        for (int u = 1; u < plan.num_units(); u++) other = std::max(other, plan.padded[u]);
        size_t caps[3] = {plan.padded[0], other, other};
        for (int i = 0; i < 3; i++) {
            T* ptr = mem.allocate_array<T>(caps[i], kind, Arena::Device, name + "_slot" + std::to_string(i), false);
            slots.push_back({.ptr = ptr, .ready = event_create(), .free = event_create()});
        }
    }
    ~UnitSlots() {
        for (auto& s : slots) {
            event_destroy(s.ready);
            event_destroy(s.free);
        }
    }
    UnitSlots(const UnitSlots&) = delete;
    UnitSlots& operator=(const UnitSlots&) = delete;

    // the slot holding unit u, or null
    UnitSlot<T>* holding(int u) {
        for (auto& s : slots)
            if (s.unit == u) return &s;
        return nullptr;
    }
    // a slot that may take unit u (right class, empty), or null
    UnitSlot<T>* vacant_for(int u) {
        int lo = u == 0 ? 0 : 1, hi = u == 0 ? 0 : 2;
        for (int i = lo; i <= hi; i++)
            if (slots[i].unit < 0 && !slots[i].in_use) return &slots[i];
        return nullptr;
    }
    std::vector<UnitSlot<T>> slots;
};

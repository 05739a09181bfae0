// Collectives on a cluster, by the latency-bandwidth (alpha-beta) model, one
// tier at a time: the link inside a node (NVLink/NVSwitch: a bandwidth per
// device) and the network between nodes (a bandwidth per node, shared by the
// node's devices when all of them talk at once, as ZeRO's data groups do).
//
// S is the whole buffer in bytes (an all-reduce's, a reduce-scatter's input,
// an all-gather's output: the trace's convention), p the participants, B
// the bandwidth per participant in one direction, a the latency of one step.
//
//   ring all-reduce          2(p-1) a + 2(p-1)/p S/B
//   ring reduce-scatter      (p-1) a + (p-1)/p S/B        (all-gather alike)
//   tree all-reduce          2 ceil(log2 p) a + 2 S/B     (a reduction up a pipelined tree and a broadcast down)
//
// NCCL picks its algorithm per call from its own tuning model; here an
// all-reduce takes the faster of ring and tree (tree wins when latency
// dominates), reduce-scatter and all-gather are rings, as in NCCL.
//
// A group with members on several nodes, m on each of n nodes, goes in two
// levels (hierarchical): reduce-scatter inside each node (S over m), the
// inter-node collective on the 1/m share each member owns (S/m over n), and
// an all-gather inside the node; m = 1 is a ring over the nodes alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

struct Tier {
    double bytes_per_s = 0;  // per participant, one direction
    double latency_s = 0;    // one step
};

inline double ring_seconds(const std::string& op, double S, int p, const Tier& t) {
    if (p <= 1) return 0;
    double steps = op == "all_reduce" ? 2.0 * (p - 1) : (double)(p - 1);
    return steps * t.latency_s + steps / p * S / t.bytes_per_s;
}

inline double tree_all_reduce_seconds(double S, int p, const Tier& t) {
    if (p <= 1) return 0;
    return 2.0 * std::ceil(std::log2((double)p)) * t.latency_s + 2.0 * S / t.bytes_per_s;
}

inline double flat_seconds(const std::string& op, double S, int p, const Tier& t) {
    double ring = ring_seconds(op, S, p, t);
    return op == "all_reduce" ? std::fmin(ring, tree_all_reduce_seconds(S, p, t)) : ring;
}

// m members on each of n nodes; intra and inter are the two tiers.
inline double cluster_collective_seconds(const std::string& op, double S, int m, int n, const Tier& intra,
                                         const Tier& inter) {
    if (op == "scalar") return flat_seconds("all_reduce", 8, m * n, n > 1 ? inter : intra);
    if (n <= 1) return flat_seconds(op, S, m, intra);
    if (m <= 1) return flat_seconds(op, S, n, inter);
    double share = S / m;
    if (op == "all_reduce")
        return flat_seconds("reduce_scatter", S, m, intra) + flat_seconds("all_reduce", share, n, inter) +
               flat_seconds("all_gather", S, m, intra);
    return flat_seconds(op, S, m, intra) + flat_seconds(op, share, n, inter);
}

// Where a group of the grid sits (rank = dp * t + tp, G devices per node):
// its members per node m and nodes n.
inline void group_span(bool tensor_group, int t, int d, int G, int& m, int& n) {
    if (tensor_group) {  // t adjacent ranks
        m = t <= G ? t : G;
        n = (t + m - 1) / m;
    } else {  // d ranks, t apart
        m = t >= G ? 1 : std::max(1, std::min(d, G / t));
        n = (d + m - 1) / m;
    }
}

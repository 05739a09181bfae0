// CPU twin of the fused classifier: softmax, cross-entropy loss and the
// gradient of the logits in one pass per row. Probabilities are never stored:
// dlogits overwrite the logits in place.
#pragma once

#include <cmath>
#include <vector>

#include "zero/base/dtype.h"

// For each row i: losses[i] = logsumexp(logits[i, :V]) - logits[i, target[i]].
// If dloss != 0, logits[i, :] becomes d(loss_sum * dloss)/d(logits) = (softmax - onehot) * dloss
// for the first V columns and 0 for the padding columns [V, Vp).
template <typename T>
void fused_classifier_cpu(T* logits,           // (BT, Vp): in logits, out dlogits
                          float* losses,       // (BT)
                          const int* targets,  // (BT)
                          int BT, int V, int Vp, float dloss) {
#pragma omp parallel
    {
        std::vector<float> e(V);  // this row's exp(logit - max)
#pragma omp for schedule(static)
        for (int i = 0; i < BT; i++) {
            T* row = logits + (size_t)i * Vp;
            int target = targets[i];
            // the row's max, over 8 lanes so the compiler can vectorise it
            float lane_max[8];
            for (int j = 0; j < 8; j++) lane_max[j] = -INFINITY;
            int v = 0;
            for (; v + 8 <= V; v += 8)
                for (int j = 0; j < 8; j++) {
                    float x = to_float(row[v + j]);
                    lane_max[j] = x > lane_max[j] ? x : lane_max[j];
                }
            float maxv = -INFINITY;
            for (int j = 0; j < 8; j++) maxv = lane_max[j] > maxv ? lane_max[j] : maxv;
            for (; v < V; v++) maxv = to_float(row[v]) > maxv ? to_float(row[v]) : maxv;
            float sum = 0.0f;
            for (v = 0; v < V; v++) sum += (e[v] = expf(to_float(row[v]) - maxv));
            losses[i] = maxv + logf(sum) - to_float(row[target]);
            if (dloss == 0.0f) continue;
            float scale = dloss / sum;  // softmax_v * dloss = e_v * dloss / sum
            for (v = 0; v < V; v++) row[v] = from_float<T>(e[v] * scale - (v == target ? dloss : 0.0f));
            for (v = V; v < Vp; v++) row[v] = from_float<T>(0.0f);
        }
    }
}

// CPU twin of the fused classifier: softmax, cross-entropy loss and the
// gradient of the logits in one pass per row. Probabilities are never stored:
// dlogits overwrite the logits in place.
#pragma once

#include <cmath>

#include "zero/dtype.h"

// For each row i: losses[i] = logsumexp(logits[i, :V]) - logits[i, target[i]].
// If dloss != 0, logits[i, :] becomes d(loss_sum * dloss)/d(logits) = (softmax - onehot) * dloss
// for the first V columns and 0 for the padding columns [V, Vp).
template <typename T>
void fused_classifier_cpu(T* logits,           // (BT, Vp): in logits, out dlogits
                          float* losses,       // (BT)
                          const int* targets,  // (BT)
                          int BT, int V, int Vp, float dloss) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++) {
        T* row = logits + (size_t)i * Vp;
        int target = targets[i];
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) maxv = fmaxf(maxv, to_float(row[v]));
        float sum = 0.0f;
        for (int v = 0; v < V; v++) sum += expf(to_float(row[v]) - maxv);
        float lse = maxv + logf(sum);
        losses[i] = lse - to_float(row[target]);
        if (dloss == 0.0f) continue;
        for (int v = 0; v < V; v++) {
            float p = expf(to_float(row[v]) - lse);
            row[v] = from_float<T>((p - (v == target ? 1.0f : 0.0f)) * dloss);
        }
        for (int v = V; v < Vp; v++) row[v] = from_float<T>(0.0f);
    }
}

// cuDNN's attention graphs (kernels/attention_cudnn.cuh, --attention cudnn) as
// cuDNN itself checks them without a GPU: every tensor and operation
// descriptor of the forward and backward graphs finalizes (each attribute's
// type and value; a matmul's operand and result shapes), and so does each
// operation graph (its tensors joined up), at GPT-2 124M's shape and the
// workbench's odd ones, bf16 and fp16. What only a GPU can tell (that an
// engine runs them, and their numbers against the CPU twin) is
// dev/cuda/attention's. A descriptor cuDNN refuses ends the program with its
// reason (fail(), exit 1).
//
// usage: test_cudnn_graphs   (built and run by test/run_gpu_tests.sh cudnn)
#include <cstdio>

#include "kernels/attention_cudnn.cuh"

using namespace cudnn_attn;

static void finalize_graph(const char* what, Plan& g, Shape s) {
    g.operation_graph();  // the trainer's own step before cuDNN's heuristics (no handle: no device needed)
    printf("ok: %s B=%lld NH=%lld T=%lld hs=%lld: %zu operations\n", what, (long long)s.B, (long long)s.NH,
           (long long)s.T, (long long)s.hs, g.ops.size());
}

int main() {
    printf("cuDNN %zu\n", cudnnGetVersion());
    const Shape shapes[] = {{8, 12, 1024, 64}, {2, 4, 100, 64}, {1, 2, 77, 32}, {2, 2, 130, 128}, {1, 2, 70, 48}};
    for (const Shape& s : shapes)
        for (cudnnDataType_t dt : {CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF}) {
            const bool bf = dt == CUDNN_DATA_BFLOAT16;
            finalize_graph(bf ? "forward bf16" : "forward fp16", *forward_graph(nullptr, s, dt), s);
            finalize_graph(bf ? "backward bf16" : "backward fp16", *backward_graph(nullptr, s, dt), s);
        }
    printf("cudnn_graphs: ok\n");
    return 0;
}

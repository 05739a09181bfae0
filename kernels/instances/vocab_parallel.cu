// The vocabulary-parallel (tensor-parallel) embedding and loss launchers,
// compiled in a translation unit of their own (kernels/cuda_instances.h lists
// them; the trainer only declares them).
#include "kernels/vocab_parallel.cuh"
#include "kernels/cuda_instances.h"

ZERO_FOR_EACH_DTYPE(ZERO_VOCAB_PARALLEL_INSTANCE, )

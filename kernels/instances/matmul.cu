// The matmul launchers, compiled in a translation unit of their own
// (kernels/cuda_instances.h lists them; the trainer only declares them).
#include "kernels/gelu.cuh"
#include "kernels/matmul.cuh"
#include "kernels/cuda_instances.h"

ZERO_FOR_EACH_DTYPE(ZERO_MATMUL_INSTANCE, )

// The layernorm launchers, compiled in a translation unit of their own
// (kernels/cuda_instances.h lists them; the trainer only declares them).
#include "kernels/layernorm.cuh"
#include "kernels/cuda_instances.h"

ZERO_FOR_EACH_DTYPE(ZERO_LAYERNORM_INSTANCE, )

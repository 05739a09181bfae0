// The dry run's ranks, compiled once for every test program that dry-runs
// (zero/run/dry_run.h, ZERO_DRY_RUN_COMPILED_ONCE): without this each of them
// instantiates the whole trainer in three dtypes.
#include "zero/run/dry_run.h"

template ZERO_DRY_RUN_RANK(float);
template ZERO_DRY_RUN_RANK(bf16);
template ZERO_DRY_RUN_RANK(f16);

# Pipeline parallelism: the schedules, the partition and the grid (pure); the
# 3-D grid in process against --pp 1 (losses and parameters to the bit, bytes,
# memory per stage); the trainer's flags, output and checkpoints across grids.
zero_test(NAME pipeline_plan SOURCES test_pipeline_plan.cpp)
zero_test(NAME pipeline SOURCES test_pipeline.cpp)

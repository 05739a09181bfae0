# Pipeline parallelism: the schedules, the partition and the grid (pure); the
# 3-D grid in process against --pp 1 (losses and parameters to the bit, bytes,
# memory per stage); the trainer's flags, output and checkpoints across grids.
zero_test(NAME pipeline_plan SOURCES test_pipeline_plan.cpp)
zero_test(NAME pipeline SOURCES test_pipeline.cpp)
zero_test(NAME pp_trainer SOURCES test_pp_trainer.cpp ARGS ${CPU_TRAINER})
zero_test(NAME pp_checkpoint SOURCES test_pp_checkpoint.cpp ARGS ${CPU_TRAINER})

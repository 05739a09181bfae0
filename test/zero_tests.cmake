# ZeRO: the shard plan, the stages end to end, communication volume, memory
# accounting against the predictor, checkpoints.
zero_test(NAME zero_stages SOURCES test_zero_stages.cpp ARGS ${CPU_TRAINER})
zero_test(NAME zero_memory SOURCES test_zero_memory.cpp ARGS ${CPU_TRAINER})

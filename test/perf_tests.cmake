# The step-time model (zero/perf/): its schedule against the trainer's own trace
# of every collective and host transfer (test_perf_trace.cpp).
zero_test(NAME perf_trace SOURCES test_perf_trace.cpp ARGS ${CPU_TRAINER} LABELS cpu perf)
# Its arithmetic against closed forms: collectives, the layout in time, costs from
# measured and specification profiles, the step's FLOPs (test_perf_model.cpp).
zero_test(NAME perf_model SOURCES test_perf_model.cpp LABELS cpu perf)

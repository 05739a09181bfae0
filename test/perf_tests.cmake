# The dry run (zero/run/dry_run.h): every rank's, against the trainer's own run
# of the same flags, op by op (its --trace) and memory to the byte
# (test_perf_trace.cpp); and at the paper's scale and beyond, against the
# memory predictor's closed forms (test_dry_run_scale.cpp).
zero_test(NAME perf_trace SOURCES test_perf_trace.cpp ARGS ${CPU_TRAINER} LABELS cpu perf)
zero_test(NAME dry_run_scale SOURCES test_dry_run_scale.cpp LABELS cpu perf)
# The step-time model's arithmetic against closed forms: collectives, the layout
# in time, costs from measured and specification profiles, the step's FLOPs,
# the delayed update's overlap (test_perf_model.cpp).
zero_test(NAME perf_model SOURCES test_perf_model.cpp LABELS cpu perf)
# --trace: a dry run's predicted step and a real run's captured one, read back as a viewer reads them
# (test_trace.cpp)
zero_test(NAME trace SOURCES test_trace.cpp ARGS ${CPU_TRAINER} LABELS cpu perf)
# --trace in Chromium's own DevTools, where Chromium and playwright-core are installed (skipped elsewhere)
zero_script_test(NAME trace_browser COMMAND sh "${REPO_ROOT}/test/test_trace_browser.sh" ${CPU_TRAINER} LABELS browser)

# The dry run (zero/run/dry_run.h): every rank's, against the trainer's own run
# of the same flags, op by op (its --trace) and memory to the byte
# (test_perf_trace.cpp); and at the paper's scale and beyond, against the
# memory predictor's closed forms (test_dry_run_scale.cpp).
zero_test(NAME perf_trace SOURCES test_perf_trace.cpp ARGS ${CPU_TRAINER} LABELS cpu perf)
zero_test(NAME dry_run_scale SOURCES test_dry_run_scale.cpp LABELS cpu perf)
# The step-time model's arithmetic against closed forms: collectives, the layout
# in time, costs from measured and specification profiles, the step's FLOPs,
# the delayed update's overlap, and every operation any flags record on every shipped profile
# (test_perf_model.cpp); that last again with every prepared variant on (perf_model_variants).
zero_test(NAME perf_model SOURCES test_perf_model.cpp ARGS "${REPO_ROOT}/zero/perf/profiles" LABELS cpu perf)
zero_script_test(NAME perf_model_variants COMMAND perf_model "${REPO_ROOT}/zero/perf/profiles" kinds LABELS cpu perf)
set_tests_properties(perf_model_variants PROPERTIES
                     ENVIRONMENT "ZERO_VARIANTS=fused_optimizer,residual_ln,device_loss,encoder_split")
# --trace: a dry run's predicted step and a real run's captured one, read back as a viewer reads them
# (test_trace.cpp)
zero_test(NAME trace SOURCES test_trace.cpp ARGS ${CPU_TRAINER} LABELS cpu perf)
# --trace in Chromium's own DevTools, where Chromium and playwright-core are installed (skipped elsewhere)
zero_script_test(NAME trace_browser COMMAND sh "${REPO_ROOT}/test/test_trace_browser.sh" ${CPU_TRAINER} LABELS browser)

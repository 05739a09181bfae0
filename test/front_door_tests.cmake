# The front door: absurd flags and files are one-line errors, DeepSpeed configs
# run as DeepSpeed would run them, the fit check answers per rank and searches
# combinations for its advice.
zero_test(NAME cli_errors SOURCES test_cli_errors.cpp ARGS ${CPU_TRAINER})
zero_test(NAME fit_check SOURCES test_fit_check.cpp ARGS ${CPU_TRAINER})

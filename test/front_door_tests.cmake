# The front door: absurd flags and files are one-line errors, DeepSpeed configs
# run as DeepSpeed would run them.
zero_test(NAME cli_errors SOURCES test_cli_errors.cpp ARGS ${CPU_TRAINER})

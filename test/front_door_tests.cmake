# The front door: absurd flags and files are one-line errors, DeepSpeed configs
# run as DeepSpeed would run them, the fit check answers per rank and searches
# combinations for its advice.
zero_test(NAME cli_errors SOURCES test_cli_errors.cpp ARGS ${CPU_TRAINER})
zero_test(NAME fit_check SOURCES test_fit_check.cpp ARGS ${CPU_TRAINER})
# The README's commands (its ```sh blocks): every flag exists, every make target
# exists, and the CPU build's commands run on a tiny model (test_readme_commands.cpp).
zero_test(NAME readme_commands SOURCES test_readme_commands.cpp ARGS ${REPO_ROOT} $<TARGET_FILE:reproduce_driver>
          LABELS cpu)
set_tests_properties(readme_commands PROPERTIES TIMEOUT 600)

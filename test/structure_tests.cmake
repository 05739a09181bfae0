# The code's structure: the include rule of the layers (dev/check_layers.sh): no
# include from a lower layer to a higher one, no include cycle.
zero_script_test(NAME layers COMMAND sh "${REPO_ROOT}/dev/check_layers.sh" "${REPO_ROOT}" LABELS build)
# zero/README.md's index of where each collective and transfer is issued, held to the code (dev/check_index.sh)
zero_script_test(NAME readme_index COMMAND sh "${REPO_ROOT}/dev/check_index.sh" "${REPO_ROOT}" LABELS build)

# The reproduction (zero/reproduce/, `make reproduce`): its driver built here
# too, the paper's tables checked against the paper as printed, and the
# measured part (memory, traffic, the homework) on a tiny model.
add_executable(reproduce_driver "${REPO_ROOT}/zero/reproduce/reproduce.cpp")
target_include_directories(reproduce_driver PRIVATE "${REPO_ROOT}")
target_compile_definitions(reproduce_driver PRIVATE ZERO_CPU=1)
target_link_libraries(reproduce_driver PRIVATE zero_dry_run)
zero_test(NAME paper_tables SOURCES test_paper_tables.cpp ARGS $<TARGET_FILE:reproduce_driver> ${CPU_TRAINER})
zero_test(NAME reproduce_measured SOURCES test_reproduce_measured.cpp
          ARGS $<TARGET_FILE:reproduce_driver> ${CPU_TRAINER} ${REPO_ROOT}/dev/homework)

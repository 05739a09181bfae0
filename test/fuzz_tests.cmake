# The fuzz targets (test/fuzz/, `make fuzz` builds them with clang and libFuzzer)
# replay their committed seeds and crash reproducers here, built with this
# compiler and a plain main() (test/fuzz/replay_main.cpp): whatever once crashed
# a parser stays fixed, without clang in CI. fail() throws in these builds
# (ZERO_FAIL_THROWS), so the host units they use are compiled apart.
add_library(zero_host_fuzz STATIC "${REPO_ROOT}/zero/base/json.cpp" "${REPO_ROOT}/zero/run/deepspeed_batch.cpp"
            "${REPO_ROOT}/zero/run/deepspeed_config.cpp" "${REPO_ROOT}/zero/run/deepspeed_keys.cpp"
            "${REPO_ROOT}/zero/comm/bootstrap.cpp" "${REPO_ROOT}/zero/comm/bootstrap_file.cpp"
            "${REPO_ROOT}/zero/comm/bootstrap_tcp.cpp" "${REPO_ROOT}/zero/layout/safetensors.cpp")
target_include_directories(zero_host_fuzz PUBLIC "${REPO_ROOT}")
target_compile_definitions(zero_host_fuzz PUBLIC ZERO_CPU=1 ZERO_FAIL_THROWS=1)
target_link_libraries(zero_host_fuzz PUBLIC OpenMP::OpenMP_CXX Threads::Threads)
file(GLOB FUZZ_SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.cpp")
foreach(src ${FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)  # fuzz_<target>
  string(REGEX REPLACE "^fuzz_" "" target ${name})
  add_executable(${name}_replay ${src} "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.cpp")
  target_link_libraries(${name}_replay PRIVATE zero_host_fuzz)
  set(inputs "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${target}")
  if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/crashes/${target}")
    list(APPEND inputs "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/crashes/${target}")
  endif()
  zero_test_dir(${name})
  add_test(NAME ${name} COMMAND ${name}_replay ${inputs} WORKING_DIRECTORY "${TEST_WORK_DIR}/${name}")
  set_tests_properties(${name} PROPERTIES LABELS fuzz)
endforeach()

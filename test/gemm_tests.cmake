# CPU GEMM (kernels/cpu/gemm.h, .cpp): accuracy against a double reference, rounding once
# to 2-byte outputs, submatrix views and bit-identical results for any thread count.
zero_test(NAME gemm_cpu SOURCES test_gemm_cpu.cpp LABELS cpu kernels)

# The same tests, and kernels/cpu/gemm.cpp, built without AVX/FMA/F16C, so the
# portable code path used on other CPUs stays correct. (Named so that
# `ctest -R gemm_cpu` selects only the first.)
zero_test(NAME gemm_portable SOURCES test_gemm_cpu.cpp LABELS cpu kernels PORTABLE)

# CPU AdamW of optimizer offload (kernels/cpu/adamw_simd.h, .cpp): every code path this CPU has
# (AVX-512, AVX2+FMA+F16C, scalar), thread counts 1, 2, 3, 8, all (grad, param)
# dtype pairs, bit-identical to the scalar reference adamw_cpu.
zero_test(NAME cpu_adamw SOURCES test_cpu_adamw.cpp LABELS cpu kernels)
set_tests_properties(cpu_adamw PROPERTIES TIMEOUT 600)

# The same test, and kernels/cpu/adamw_simd.cpp, built without AVX/FMA/F16C:
# the vector paths come from adamw_simd.cpp's target attributes and regions
# alone, and adamw_cpu is compiled without FMA contraction, so it is checked
# against a derived bound instead of bit for bit. (Named so that
# `ctest -R cpu_adamw` selects both, `-R cpu_adamw$` the first.)
zero_test(NAME cpu_adamw_portable SOURCES test_cpu_adamw.cpp LABELS cpu kernels PORTABLE)
set_tests_properties(cpu_adamw_portable PROPERTIES TIMEOUT 600)

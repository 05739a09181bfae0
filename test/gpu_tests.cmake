# CUDA: the kernel workbench in check mode (every CUDA kernel against its CPU
# twin; needs an NVIDIA GPU, skipped otherwise), and a compile of the CUDA
# trainer (needs only nvcc, skipped without it).
zero_script_test(NAME gpu_kernels COMMAND sh "${REPO_ROOT}/test/run_gpu_tests.sh" kernels LABELS gpu)
set_tests_properties(gpu_kernels PROPERTIES TIMEOUT 3600)

zero_script_test(NAME cuda_build COMMAND sh "${REPO_ROOT}/test/run_gpu_tests.sh" build LABELS build)
set_tests_properties(cuda_build PROPERTIES TIMEOUT 1800)

# cuDNN's attention graphs (--attention cudnn) as cuDNN checks them without a
# GPU (needs nvcc and cuDNN, skipped without them).
zero_script_test(NAME cudnn_graphs COMMAND sh "${REPO_ROOT}/test/run_gpu_tests.sh" cudnn LABELS build)

# Whole training runs on the GPU against the CPU build: fp32/bf16 losses, stages
# 0-3 at 1, 2, 4 emulated ranks, fp16 overflow and loss scaling.
zero_script_test(NAME gpu_training COMMAND bash "${REPO_ROOT}/test/run_gpu_train_tests.sh" "${REPO_ROOT}" LABELS gpu)
set_tests_properties(gpu_training PROPERTIES TIMEOUT 3600)

# The Makefile finds NCCL when it lives only in PyTorch's wheel folder, links it
# with an rpath, and a program so linked runs (needs nvcc, no GPU).
zero_script_test(NAME find_nccl COMMAND sh "${REPO_ROOT}/test/test_find_nccl.sh" "${REPO_ROOT}" LABELS build)

#!/bin/sh
# GPU tests for CTest.
#
#   test/run_gpu_tests.sh          build the kernel workbench (dev/cuda) and run every
#                                  program in check mode: each CUDA kernel against its
#                                  CPU twin. Exit 77 (skipped) without an NVIDIA GPU.
#   test/run_gpu_tests.sh build    compile the CUDA trainer (make train_gpt2_zero).
#                                  Exit 77 (skipped) without nvcc; needs no GPU.
set -u
REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)

find_nvcc() {
    if command -v nvcc >/dev/null 2>&1; then return 0; fi
    [ -x /usr/local/cuda/bin/nvcc ]
}

case "${1:-kernels}" in
build)
    if ! find_nvcc; then
        echo "nvcc not found (neither on PATH nor /usr/local/cuda/bin): skipping the CUDA build"
        exit 77
    fi
    exec make -C "$REPO_ROOT" -j "$(nproc 2>/dev/null || echo 2)" train_gpt2_zero
    ;;
kernels)
    if ! nvidia-smi -L >/dev/null 2>&1; then
        echo "no NVIDIA GPU (nvidia-smi -L failed): skipping the GPU kernel tests"
        exit 77
    fi
    if ! find_nvcc; then
        echo "an NVIDIA GPU but no nvcc: cannot build the kernel workbench"
        exit 1
    fi
    nvidia-smi -L
    jobs=$(nproc 2>/dev/null || echo 4)
    make -C "$REPO_ROOT/dev/cuda" -j "$jobs" all || { echo "workbench build failed"; exit 1; }
    make -C "$REPO_ROOT/dev/cuda" test
    ;;
*)
    echo "usage: $0 [kernels|build]" >&2
    exit 2
    ;;
esac

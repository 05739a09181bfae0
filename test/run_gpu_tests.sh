#!/bin/sh
# GPU tests for CTest.
#
#   test/run_gpu_tests.sh          build the kernel workbench (dev/cuda) and run every
#                                  program in check mode: each CUDA kernel against its
#                                  CPU twin. Exit 77 (skipped) without an NVIDIA GPU.
#   test/run_gpu_tests.sh build    compile the CUDA trainer (into build/cuda_check,
#                                  unoptimised, PTX only) and take its dry run as one
#                                  rank of a launched job, and with --attention cudnn where
#                                  cuDNN is found (the dry run needs no GPU).
#                                  Exit 77 (skipped) without nvcc; needs no GPU.
#   test/run_gpu_tests.sh cudnn    build test/test_cudnn_graphs.cu against the cuDNN the
#                                  Makefile finds and run it: cuDNN's attention graphs as
#                                  cuDNN checks them without a GPU. Exit 77 (skipped)
#                                  without nvcc or cuDNN.
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
    # a compile check, beside the real build: host and device code unoptimised, the device's
    # as PTX only (no SASS), a quarter of the real build's time
    dir=build/cuda_check
    make -C "$REPO_ROOT" -j "$(nproc 2>/dev/null || echo 2)" CUDA_DIR=$dir CUDA_TRAINER=$dir/train_gpt2_zero \
        NVCC_OPT="-O0 -Xcicc -O0" CUDA_ARCH="-gencode arch=compute_90,code=compute_90" $dir/train_gpt2_zero || exit 1
    RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$REPO_ROOT/$dir/train_gpt2_zero" -e d12 -b 4 -t 256 -z 2 --dry_run 1 >/dev/null || {
        echo "the CUDA trainer's dry run, as rank 0 of 2 under a launcher, failed (it must not need a GPU)"
        exit 1
    }
    echo "the CUDA trainer's dry run as rank 0 of 2 under a launcher: ok"
    # with cuDNN's attention where the build found cuDNN (its workspace in the accounting; no handle made)
    if sh "$REPO_ROOT/dev/find_cudnn.sh" >/dev/null 2>&1; then
        "$REPO_ROOT/$dir/train_gpt2_zero" -e d12 -b 4 -t 256 -z 2 -p bf16 --attention cudnn --dry_run 1 >/dev/null || {
            echo "the CUDA trainer's dry run with --attention cudnn failed"
            exit 1
        }
        echo "the CUDA trainer's dry run with --attention cudnn: ok"
    fi
    ;;
cudnn)
    find_nvcc || { echo "nvcc not found: skipping"; exit 77; }
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    found=$(sh "$REPO_ROOT/dev/find_cudnn.sh" "$(dirname "$(dirname "$nvcc")")") || { echo "no cuDNN found: skipping"; exit 77; }
    set -- $found  # include dir, library dir, library file
    mkdir -p "$REPO_ROOT/build"
    "$nvcc" -std=c++20 -I"$REPO_ROOT" -I"$1" -DZERO_CUDA -DZERO_CUDNN "$REPO_ROOT/test/test_cudnn_graphs.cu" \
        -o "$REPO_ROOT/build/test_cudnn_graphs" -L"$2" -Xlinker -rpath="$2" -l:"$3" || exit 1
    "$REPO_ROOT/build/test_cudnn_graphs"
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
    echo "usage: $0 [kernels|build|cudnn]" >&2
    exit 2
    ;;
esac

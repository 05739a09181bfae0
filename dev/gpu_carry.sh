#!/bin/sh
# What must travel to a lent GPU machine, in one place. That machine reaches
# nothing outside, so the data and, for the side-by-side run, karpathy/llm.c's
# source go along with the call, as ignored paths named in the device tool's
# `carry` list:
#
#   data/mobydick  data/gpt2_tokenizer.bin  .carry
#
# This script makes them: `make data` here, .carry/stb (stb_image_write.h and
# stb_easy_font.h from Debian's libstb-dev, which the charts need and that
# machine may lack: the Makefile looks there after /usr/include/stb),
# .carry/llm.c from a local copy of llm.c's repository (LLMC_SRC, a git directory or a checkout; never committed,
# only built and run there beside ours), and .carry/cudnn-frontend/include, the
# header-only cuDNN frontend that llm.c's USE_CUDNN=1 build needs (bench section
# `peers`), from a local copy of NVIDIA/cudnn-frontend (CUDNN_FRONTEND_SRC, a git
# directory or a checkout; only its include/, ~3.3 MB; 1.23 compiles here with
# llm.c's cudnn_att.cpp and needs -lnvrtc). cuDNN itself is not carried: the
# GPU machine has it in PyTorch's wheel (dev/find_cudnn.sh).
# Without the variables, the fetch tool's mirrors under /work/.mirror are used
# when present. Prints the carry list and its size.
#
#   LLMC_SRC=/path/to/llm.c CUDNN_FRONTEND_SRC=/path/to/cudnn-frontend sh dev/gpu_carry.sh
set -eu
cd "$(dirname "$0")/.."
make data >/dev/null
mkdir -p .carry
if [ -f /usr/include/stb/stb_image_write.h ] && [ -f /usr/include/stb/stb_easy_font.h ]; then
    mkdir -p .carry/stb
    cp /usr/include/stb/stb_image_write.h /usr/include/stb/stb_easy_font.h .carry/stb/
else
    echo "note: no /usr/include/stb (apt-get install libstb-dev): the GPU machine's figures will be CSVs only"
fi
[ -z "${LLMC_SRC:-}" ] && [ -d /work/.mirror/karpathy+llm.c/repo ] && LLMC_SRC=/work/.mirror/karpathy+llm.c/repo
[ -z "${CUDNN_FRONTEND_SRC:-}" ] && [ -d /work/.mirror/NVIDIA+cudnn-frontend/repo ] &&
    CUDNN_FRONTEND_SRC=/work/.mirror/NVIDIA+cudnn-frontend/repo
if [ -n "${LLMC_SRC:-}" ] && [ ! -d .carry/llm.c ]; then
    if [ -d "$LLMC_SRC/.git" ] || git -C "$LLMC_SRC" rev-parse --is-bare-repository >/dev/null 2>&1; then
        git -C "$LLMC_SRC" archive HEAD --prefix=llm.c/ | tar -x -C .carry
    else
        cp -r "$LLMC_SRC" .carry/llm.c
    fi
fi
# CUDA 13 changed cudaMemAdvise's last argument from a device number to a
# cudaMemLocation; llm.c (2024) still passes cudaCpuDeviceId. Patched in the
# carried copy only, so that it builds with the GPU machine's nvcc 13.
if [ -f .carry/llm.c/llmc/cuda_utils.cuh ]; then
    sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
        .carry/llm.c/llmc/cuda_utils.cuh
fi
if [ -n "${CUDNN_FRONTEND_SRC:-}" ] && [ ! -d .carry/cudnn-frontend/include ]; then
    mkdir -p .carry/cudnn-frontend
    if [ -d "$CUDNN_FRONTEND_SRC/.git" ] || git -C "$CUDNN_FRONTEND_SRC" rev-parse --is-bare-repository >/dev/null 2>&1; then
        git -C "$CUDNN_FRONTEND_SRC" archive HEAD include | tar -x -C .carry/cudnn-frontend
        echo "cudnn-frontend: $(git -C "$CUDNN_FRONTEND_SRC" describe --tags HEAD 2>/dev/null || git -C "$CUDNN_FRONTEND_SRC" rev-parse HEAD)"
    else
        cp -r "$CUDNN_FRONTEND_SRC/include" .carry/cudnn-frontend/include
    fi
fi
[ -d .carry/llm.c ] || echo "note: no .carry/llm.c (set LLMC_SRC): the llm.c side-by-side will be skipped"
[ -d .carry/cudnn-frontend/include ] ||
    echo "note: no .carry/cudnn-frontend/include (set CUDNN_FRONTEND_SRC): llm.c runs without cuDNN in section peers"
echo "carry: data/mobydick data/gpt2_tokenizer.bin .carry"
du -shc data/mobydick data/gpt2_tokenizer.bin .carry | tail -n 1

#!/bin/sh
# What a GPU machine without network access needs besides the repository:
#
#   data/mobydick  data/gpt2_tokenizer.bin  .carry/
#
# Run this where the network is reachable (it runs `make data` first), then
# copy these along with the repository (all three are gitignored). The .carry/
# folder holds what such a machine needs beside the repository and cannot
# download:
#   .carry/stb                     stb_image_write.h and stb_easy_font.h from
#                                  Debian's libstb-dev, for the charts (the
#                                  Makefile looks there after /usr/include/stb)
#   .carry/llm.c                   karpathy/llm.c's source, for the side-by-side
#                                  benchmark (dev/bench_gpu.sh llmc, peers); built
#                                  and run there beside ours, never committed
#   .carry/cudnn-frontend/include  NVIDIA/cudnn-frontend's header-only frontend,
#                                  which llm.c's USE_CUDNN=1 build needs
#                                  (dev/bench_gpu.sh peers; 1.23 compiles with
#                                  llm.c's cudnn_att.cpp and needs -lnvrtc)
# The last two come from local copies that you name (a git directory or a
# checkout): LLMC_SRC and CUDNN_FRONTEND_SRC; without them those parts are
# skipped. cuDNN itself is not copied: dev/find_cudnn.sh finds it on the GPU
# machine (e.g. in PyTorch's wheel). Prints the list and its size.
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
if [ -n "${LLMC_SRC:-}" ] && [ ! -d .carry/llm.c ]; then
    if [ -d "$LLMC_SRC/.git" ] || git -C "$LLMC_SRC" rev-parse --is-bare-repository >/dev/null 2>&1; then
        git -C "$LLMC_SRC" archive HEAD --prefix=llm.c/ | tar -x -C .carry
    else
        cp -r "$LLMC_SRC" .carry/llm.c
    fi
fi
# CUDA 13 changed cudaMemAdvise's last argument from a device number to a
# cudaMemLocation; llm.c (2024) still passes cudaCpuDeviceId. Patched in the
# copy under .carry/ only, so that it builds with nvcc 13.
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
echo "copy with the repository: data/mobydick data/gpt2_tokenizer.bin .carry"
du -shc data/mobydick data/gpt2_tokenizer.bin .carry | tail -n 1

#!/bin/sh
# Find cuDNN: for the trainer's --attention cudnn (the Makefile, dev/cuda/Makefile)
# and for llm.c's USE_CUDNN=1 build (dev/bench_gpu.sh section `peers`).
# Prints one line, "<include dir> <lib dir> <library file name>", or nothing
# (exit 1) when no cuDNN is found. Search order:
#   1. $CUDNN_HOME (include/ and lib/ or lib64/ under it)
#   2. the CUDA toolkit, $1 (where NVIDIA's tarball is often unpacked)
#   3. the system (/usr/include or /usr/include/x86_64-linux-gnu, and
#      /usr/lib/x86_64-linux-gnu, /usr/lib64; the prefix /usr can be changed with
#      CUDNN_SYSTEM_PREFIX)
#   4. PyTorch's wheel nvidia-cudnn-cu13 (nvidia/cudnn/include, nvidia/cudnn/lib,
#      or any nvidia/*/ holding them), which ships only the versioned libcudnn.so.9
#
# With only libcudnn.so.9 the linker's -lcudnn finds nothing: link through a
# folder with a libcudnn.so symlink to it (bench_gpu.sh does), and put the lib
# dir on LD_LIBRARY_PATH at run time (cuDNN loads its sub-libraries, e.g.
# libcudnn_engines_precompiled.so.9, by name when a graph is built).
#
#   sh dev/find_cudnn.sh [CUDA_HOME]
CUDA_HOME=${1:-/usr/local/cuda}

try() {  # try INCLUDE_DIR LIB_DIR...: print and exit if cudnn.h and a libcudnn are there
    inc=$1
    shift
    [ -f "$inc/cudnn.h" ] || return 1
    for lib in "$@"; do
        for f in libcudnn.so libcudnn.so.9; do
            if [ -e "$lib/$f" ]; then echo "$inc $lib $f"; exit 0; fi
        done
    done
    return 1
}

[ -n "${CUDNN_HOME:-}" ] && try "$CUDNN_HOME/include" "$CUDNN_HOME/lib" "$CUDNN_HOME/lib64"
try "$CUDA_HOME/include" "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib"
SYS=${CUDNN_SYSTEM_PREFIX:-/usr}
for inc in "$SYS/include" "$SYS/include/x86_64-linux-gnu"; do
    try "$inc" "$SYS/lib/x86_64-linux-gnu" "$SYS/lib64" "$SYS/lib"
done
for py in ${PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    dir=$("$py" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    [ -n "$dir" ] && try "$dir/include" "$dir/lib"
    # CUDA 13's wheels may gather libraries under nvidia/<name>/: look at each
    top=$("$py" -c 'import nvidia as m; print(list(m.__path__)[0])' 2>/dev/null) || continue
    for d in "$top"/*/; do
        [ -d "$d" ] && try "${d}include" "${d}lib" "${d}lib64"
    done
done
exit 1

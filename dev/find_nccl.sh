#!/bin/sh
# Find NCCL for the Makefile. Prints one line, "<include dir> <lib dir> <library
# file name>", or nothing (exit 1) when no NCCL is found. Search order:
#   1. $NCCL_HOME (include/ and lib/ or lib64/ under it)
#   2. the CUDA toolkit, $1 (unusual, but some machines have it there)
#   3. the system (/usr/include, /usr/lib/x86_64-linux-gnu, /usr/lib64; the prefix
#      /usr can be changed with NCCL_SYSTEM_PREFIX, which the tests use)
#   4. PyTorch's wheel nvidia-nccl-cu13 (nvidia/nccl/include, nvidia/nccl/lib), which
#      ships only the versioned libnccl.so.2
#
#   sh dev/find_nccl.sh [CUDA_HOME]
CUDA_HOME=${1:-/usr/local/cuda}

try() {  # try INCLUDE_DIR LIB_DIR...: print and exit if nccl.h and a libnccl are there
    inc=$1
    shift
    [ -f "$inc/nccl.h" ] || return 1
    for lib in "$@"; do
        for f in libnccl.so libnccl.so.2; do
            if [ -e "$lib/$f" ]; then echo "$inc $lib $f"; exit 0; fi
        done
    done
    return 1
}

[ -n "${NCCL_HOME:-}" ] && try "$NCCL_HOME/include" "$NCCL_HOME/lib" "$NCCL_HOME/lib64"
try "$CUDA_HOME/include" "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib"
SYS=${NCCL_SYSTEM_PREFIX:-/usr}
try "$SYS/include" "$SYS/lib/x86_64-linux-gnu" "$SYS/lib64" "$SYS/lib"
for py in ${PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    dir=$("$py" -c 'import nvidia.nccl as m, os; print(list(m.__path__)[0])' 2>/dev/null) || continue
    [ -n "$dir" ] && try "$dir/include" "$dir/lib"
done
exit 1

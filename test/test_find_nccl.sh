#!/bin/sh
# The Makefile finds NCCL where PyTorch's wheel keeps it (CTest: find_nccl, label
# build). A GPU machine may have NCCL only inside the Python
# environment (nvidia-nccl-cu13: nvidia/nccl/include/nccl.h and
# nvidia/nccl/lib/libnccl.so.2, no unversioned .so). This test builds that layout
# from this machine's NCCL, hides every other NCCL (a CUDA_HOME whose lib64 has
# all of the toolkit's libraries but NCCL's, an empty system prefix), and checks:
#   1. dev/find_nccl.sh picks the wheel, and NCCL_HOME wins over it;
#   2. `make print-cuda-flags` compiles with the wheel's include folder and links
#      its libnccl.so.2 with an rpath to it;
#   3. a program linked with exactly those flags runs without LD_LIBRARY_PATH,
#      the loader finds the wheel's library, and its version is the header's.
# Skipped (77) without nvcc or without an NCCL in the CUDA toolkit to copy.
#
#   test/test_find_nccl.sh [REPO_ROOT]
set -u
REPO=$(cd "${1:-$(dirname "$0")/..}" && pwd)
WORK=$PWD/find_nccl
fail() { echo "FAIL: $*" >&2; exit 1; }

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || { echo "SKIP: no nvcc"; exit 77; }
CUDA=$(cd "$(dirname "$NVCC")/.." && pwd)
LIBDIR=$CUDA/lib64
[ -f "$CUDA/include/nccl.h" ] && [ -e "$LIBDIR/libnccl.so.2" ] ||
    { echo "SKIP: no NCCL in $CUDA to build a fake wheel from"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 to import the fake wheel"; exit 77; }

rm -rf "$WORK"
mkdir -p "$WORK/site/nvidia/nccl/include" "$WORK/site/nvidia/nccl/lib" "$WORK/cuda/lib64" "$WORK/empty"
WHEEL=$WORK/site/nvidia/nccl
: >"$WHEEL/__init__.py"
cp "$CUDA/include/nccl.h" "$WHEEL/include/"
ln -s "$(readlink -f "$LIBDIR/libnccl.so.2")" "$WHEEL/lib/libnccl.so.2"  # the wheel's only name for it
for f in "$LIBDIR"/*; do
    case $(basename "$f") in libnccl*) ;; *) ln -s "$f" "$WORK/cuda/lib64/" ;; esac
done
export PYTHONPATH="$WORK/site" NCCL_SYSTEM_PREFIX="$WORK/empty"
unset NCCL_HOME

echo "== 1. dev/find_nccl.sh"
found=$(sh "$REPO/dev/find_nccl.sh" "$WORK/cuda") || fail "found no NCCL with only the fake wheel"
echo "  $found"
[ "$found" = "$WHEEL/include $WHEEL/lib libnccl.so.2" ] || fail "expected the wheel, got: $found"
mkdir -p "$WORK/home/include" "$WORK/home/lib"
cp "$CUDA/include/nccl.h" "$WORK/home/include/"
ln -s "$(readlink -f "$LIBDIR/libnccl.so.2")" "$WORK/home/lib/libnccl.so"
found=$(NCCL_HOME="$WORK/home" sh "$REPO/dev/find_nccl.sh" "$WORK/cuda")
[ "$found" = "$WORK/home/include $WORK/home/lib libnccl.so" ] || fail "NCCL_HOME did not win: $found"
found=$(PYTHONPATH= sh "$REPO/dev/find_nccl.sh" "$WORK/cuda" 2>/dev/null)
case $found in "$WHEEL"*) fail "found the wheel without its PYTHONPATH" ;; esac
echo "  NCCL_HOME wins over the wheel; without the wheel on the path it is not found there"

echo "== 2. make print-cuda-flags"
flags=$(make -s -C "$REPO" print-cuda-flags CUDA_HOME="$WORK/cuda" NVCC="$NVCC") || fail "make print-cuda-flags failed"
echo "$flags" | sed 's/^/  /'
cflags=$(echo "$flags" | sed -n 's/^NVCC_FLAGS=//p')
libs=$(echo "$flags" | sed -n 's/^NVCC_LIBS=//p')
for want in "-I$WHEEL/include" "-L$WHEEL/lib" "-rpath=$WHEEL/lib" "-l:libnccl.so.2"; do
    case " $cflags $libs " in *" $want "* | *"$want "*) ;; *) fail "the build flags lack $want" ;; esac
done

echo "== 3. a program linked with those flags"
# shellcheck disable=SC2086
"$NVCC" -std=c++20 $(echo "$cflags" | grep -o -- "-I[^ ]*") -o "$WORK/nccl_probe" "$REPO/test/nccl_probe.cu" $libs ||
    fail "cannot link against the wheel's NCCL"
runpath=$(readelf -d "$WORK/nccl_probe" | grep -E 'RUNPATH|RPATH')
echo "  $runpath"
echo "$runpath" | grep -q "$WHEEL/lib" || fail "no rpath to the wheel's lib folder"
resolved=$(env -u LD_LIBRARY_PATH ldd "$WORK/nccl_probe" | grep libnccl)
echo "  $resolved"
echo "$resolved" | grep -q "$WHEEL/lib/libnccl.so.2" || fail "the loader did not take the wheel's libnccl.so.2"
env -u LD_LIBRARY_PATH "$WORK/nccl_probe" || fail "the probe did not run, or its library is not its header's version"
echo "ok"

#!/usr/bin/env bash
# The first command on a GPU machine (under 2 minutes on a 16-core H100 machine):
# the driver and GPU, nvcc, which NCCL and cuBLASLt the build found, the build of
# the CUDA trainer, the CPU trainer and the kernel workbench, `ldd` of the
# binaries with nothing "not found", the data (`make data`, or copied beside the
# repository: dev/gpu_carry.sh), then a 3-step GPT-2 124M run. The last line
# says "preflight: ready" or what is missing.
#
#   bash dev/gpu_preflight.sh            (logs under $OUT, default out/gpu)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu}
mkdir -p "$OUT"
LOG=$OUT/preflight.log
: >"$LOG"
missing=()
say() { echo "$*" | tee -a "$LOG"; }

say "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$LOG" ||
    missing+=("nvidia-smi")
say "$(nproc) cores, $(free -g | awk '/Mem:/ { print $2 }') GiB host memory, $(grep -o -m 1 -w 'avx512f' /proc/cpuinfo || echo no) avx512"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
say "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo missing))"
nccl=$(sh dev/find_nccl.sh "$(dirname "$(dirname "$NVCC")")") || missing+=("NCCL (set NCCL_HOME)")
say "NCCL: ${nccl:-not found}"

say "== build (make -j$(nproc))"
start=$(date +%s)
make -j"$(nproc)" train_gpt2_zero train_gpt2_zero_cpu >"$OUT/build.log" 2>&1 &
p1=$!
make -C dev/cuda -j"$(nproc)" all >"$OUT/workbench_build.log" 2>&1 &
p2=$!
wait $p1 || { tail -n 30 "$OUT/build.log"; missing+=("the trainer build"); }
wait $p2 || { tail -n 30 "$OUT/workbench_build.log"; missing+=("the workbench build"); }
say "built in $(($(date +%s) - start)) s; $(grep -m 1 '^CUDA:' "$OUT/build.log")"
for b in train_gpt2_zero dev/cuda/matmul; do
    [ -x "$b" ] || continue
    nf=$(ldd "$b" | grep -c "not found")
    say "ldd $b: $(ldd "$b" | grep -E 'nccl|cublasLt|cudart' | awk '{ print $1 " -> " $3 }' | tr '\n' ' ') ($nf not found)"
    [ "$nf" = 0 ] || missing+=("libraries of $b")
done

say "== data"
for f in data/mobydick/mobydick_train.bin data/mobydick/mobydick_val.bin data/gpt2_tokenizer.bin; do
    [ -s "$f" ] && say "$f: $(stat -c %s "$f") bytes" || missing+=("$f (make data, or copy it: dev/gpu_carry.sh)")
done

if [ -x train_gpt2_zero ] && [ -s data/mobydick/mobydick_train.bin ]; then
    say "== 3 steps of GPT-2 124M (d12, B 16, T 1024, bf16, stage 1)"
    timeout 120 ./train_gpt2_zero -e d12 -b 16 -t 1024 -x 3 -v 0 -s 0 -z 1 -p bf16 >"$OUT/preflight_d12.log" 2>&1
    rc=$?
    tail -n 6 "$OUT/preflight_d12.log" | tee -a "$LOG"
    [ $rc = 0 ] || missing+=("the 3-step d12 run (exit $rc)")
fi

if [ ${#missing[@]} = 0 ]; then say "preflight: ready"; else say "preflight: NOT ready: ${missing[*]}"; exit 1; fi

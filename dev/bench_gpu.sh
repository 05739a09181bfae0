#!/usr/bin/env bash
# Everything a GPU session should run, in one call: build, the GPU test suite,
# the kernel benchmarks against their targets, the trainer's tokens/s, MFU and
# memory for GPT-2 d12/d24/d48 at every stage and precision, offload, the largest
# trainable model, and the side-by-side comparisons (PyTorch's attention,
# karpathy/llm.c's train_gpt2cu when its source is provided). A summary table
# comes last; logs go to $OUT (default $OUT from the device tool, else /tmp/bench).
#
#   bash dev/bench_gpu.sh [quick]
#
# The GPU machine reaches nothing outside: carry the data (data/mobydick,
# data/gpt2_tokenizer.bin) and, for the llm.c comparison, a copy of its source in
# an ignored folder named by LLMC_DIR (built there, never committed).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench}
mkdir -p "$OUT"
QUICK=${1:-}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
row() { printf "%-58s %s\n" "$1" "$2" | tee -a "$SUMMARY"; }
section() { echo; echo "##### $*"; }

section "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
GPU_NAME=$(head -n 1 "$OUT/gpu.txt" | cut -d, -f1)
nproc; free -g | head -2

section "build"
make -j"$(nproc)" train_gpt2_zero train_gpt2_zero_cpu >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; exit 1; }
make -C dev/cuda -j"$(nproc)" >"$OUT/workbench_build.log" 2>&1 || { tail -n 40 "$OUT/workbench_build.log"; exit 1; }
[ -f data/mobydick/mobydick_train.bin ] || { echo "no data: carry data/mobydick"; exit 1; }

section "GPU tests (ctest -L gpu)"
cmake -S test -B build/test -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build/test -j"$(nproc)" >"$OUT/test_build.log" 2>&1 &&
    (cd build/test && ctest -L gpu --output-on-failure 2>&1) | tee "$OUT/ctest_gpu.log" | tail -n 15
row "ctest -L gpu" "$(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -n 1)"

section "kernel benchmarks (dev/cuda)"
(cd dev/cuda && for p in encoder layernorm matmul gelu classifier adamw reduce attention; do
    echo "=== $p"; ./$p 2>&1; done) | tee "$OUT/kernels.log" | grep -E "===|PASS|FAIL|copy|TF/s|GB/s" | head -n 120
grep -E "of copy|% of" "$OUT/kernels.log" | while read -r line; do row "kernel" "$line"; done

section "attention: ours against PyTorch SDPA (B 8, T 1024, 12 heads, hs 64, bf16)"
python3 dev/bench_sdpa.py 8 1024 12 64 2>&1 | tee "$OUT/sdpa.log"
ours=$(grep -m 1 "warm:" "$OUT/kernels.log" | sed -E 's/.*fwd\+bwd +([0-9.]+) us.*/\1/')
for backend in flash cudnn; do
    theirs=$(awk -v b="$backend" '$1 == "sdpa" && $2 == b && NF == 5 { print $5 * 1000 }' "$OUT/sdpa.log")
    [ -n "$theirs" ] && [ -n "$ours" ] &&
        row "attention fwd+bwd: ours ${ours} us vs SDPA $backend ${theirs} us" \
            "$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.0f%% of its speed (target >= 80%%)", 100 * b / a }')"
done

# one trainer run: name, flags; records tok/s, MFU and peak memory
train() {
    local name=$1
    shift
    ./train_gpt2_zero -i data/mobydick/mobydick_train.bin -v 0 -s 0 -x "${STEPS:-12}" "$@" --mem_report 1 \
        -o "$OUT/run_$name" >"$OUT/run_$name.log" 2>&1
    local rc=$?
    local avg mfu mem
    avg=$(grep -m 1 "average step time" "$OUT/run_$name.log" | sed -E 's/.*\(([0-9]+) tok\/s\).*/\1/')
    mfu=$(grep "MFU" "$OUT/run_$name.log" | tail -n 1 | sed -E 's/.*MFU ([0-9.]+)%.*/\1/')
    mem=$(grep "mem rank 0 device" "$OUT/run_$name.log" | tail -n 1 | sed -E 's/.*peak +([0-9.]+).*reserved +([0-9.]+).*/peak \1 MiB, reserved \2 MiB/')
    if [ $rc -ne 0 ]; then row "$name" "FAILED: $(grep -m 1 error "$OUT/run_$name.log")"
    else row "$name" "${avg:-?} tok/s, MFU ${mfu:-?}%, $mem"; fi
}

section "karpathy/llm.c train_gpt2cu, same machine, same batch (d12, B 16, T 1024, bf16)"
if [ -n "${LLMC_DIR:-}" ] && [ -d "$LLMC_DIR" ]; then
    (cd "$LLMC_DIR" && make train_gpt2cu NO_MULTI_GPU=1 USE_CUDNN=0 >"$OUT/llmc_build.log" 2>&1) &&
        "$LLMC_DIR/train_gpt2cu" -e d12 -b 16 -t 1024 -x 12 -v 0 -s 0 -i data/mobydick/mobydick_train.bin \
            -j data/mobydick/mobydick_val.bin >"$OUT/llmc.log" 2>&1
    llmc=$(grep -E "^step +[0-9]+/" "$OUT/llmc.log" | tail -n 8 | sed -E 's/.*\| +([0-9]+) tok\/s.*/\1/' |
        awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }')
    row "llm.c train_gpt2cu d12 B16 T1024 bf16" "${llmc:-?} tok/s"
else
    row "llm.c train_gpt2cu" "not run (set LLMC_DIR to a carried copy of its source)"
fi

section "trainer: GPT-2 124M, T 1024, stages 0-3 at N = 1"
for z in 0 1 2 3; do train "d12_bf16_z$z" -e d12 -b 16 -t 1024 -z "$z" -p bf16; done
for z in 1 3; do train "d12_fp16_z$z" -e d12 -b 16 -t 1024 -z "$z" -p fp16; done
for z in 0 3; do train "d12_bf16_z${z}_n4emulated" -e d12 -b 4 -t 1024 -z "$z" --ranks 4 -p bf16; done
[ "$QUICK" = quick ] && { cat "$SUMMARY"; exit 0; }

section "trainer: d24 and d48"
for p in bf16 fp16; do
    train "d24_${p}_z1" -e d24 -b 8 -t 1024 -z 1 -p "$p"
    train "d48_${p}_z1" -e d48 -b 4 -t 1024 -z 1 -p "$p"
    train "d48_${p}_z3" -e d48 -b 4 -t 1024 -z 3 -p "$p"
done

section "offload (tokens/s and memory), stages 2 and 3"
for m in "d12 16" "d24 8" "d48 4"; do
    set -- $m
    for z in 2 3; do
        train "${1}_z${z}" -e "$1" -b "$2" -t 1024 -z "$z" -p bf16
        train "${1}_z${z}_offopt" -e "$1" -b "$2" -t 1024 -z "$z" -p bf16 --offload_optimizer cpu
    done
    train "${1}_z3_offall" -e "$1" -b "$2" -t 1024 -z 3 -p bf16 --offload_optimizer cpu --offload_param cpu
done

section "the largest GPT-2-shaped model for 20 steps (C 4096, 32 heads, raise the layers)"
largest() {  # tag, extra flags: the largest L the predictor says fits this GPU, then 20 real steps
    local tag=$1 best=0
    shift
    for L in 2 4 8 12 16 20 24 28 32 36 40 44 48 56 64 72 80; do
        ./train_gpt2_zero -e "L=$L,H=32,C=4096" -b 1 -t 1024 -p bf16 "$@" --estimate 1 >/dev/null 2>&1 || break
        best=$L
    done
    if [ "$best" -gt 0 ]; then
        STEPS=20 train "largest_${tag}_L${best}" -e "L=$best,H=32,C=4096" -b 1 -t 1024 -p bf16 "$@"
        row "largest $tag" "L=$best ($(awk -v l="$best" 'BEGIN { printf "%.2fB", (12 * l * 4096 * 4096 + 51328 * 4096) / 1e9 }') parameters)"
    fi
}
largest no_offload -z 3 -r 2
largest offload -z 3 -r 2 --offload_optimizer cpu --offload_param cpu --offload_activations 1

section "CPU AdamW on this machine's cores"
g++ -std=c++17 -O3 -march=native -fopenmp -I. dev/bench_cpu_adamw.cpp -o build/bench_cpu_adamw -lpthread &&
    build/bench_cpu_adamw | tee "$OUT/cpu_adamw.log" | tail -n 12

section "summary ($GPU_NAME)"
cat "$SUMMARY"

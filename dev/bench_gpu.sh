#!/usr/bin/env bash
# GPU measurements in sections, each alone under 10 minutes on an H100, each
# appending its rows to $OUT/summary.txt and keeping its logs under $OUT
# (default out/gpu). Run `dev/gpu_preflight.sh` first, then sections alone or
# in the groups `plan` prints (dev/bench_gpu_group.sh runs one group).
# Results measured so far: dev/gpu_notes.md.
#
#   bash dev/bench_gpu.sh plan            the groups, in order, with minutes
#   bash dev/bench_gpu.sh SECTION...      run these sections (after the preflight built)
#
# Sections:
#   tests     ctest -L gpu: every kernel against its CPU twin, GPU training vs the
#             CPU build, stages 0-3 at N = 1, 2, 4 emulated, fp16 overflow, NCCL launch;
#             and the CPU AdamW test on this host's AVX-512
#   sanitize  compute-sanitizer memcheck + racecheck: the workbench, and 2 steps of
#             -z 3 --ranks 2 bf16 (SANITIZE_TOOLS=racecheck: one tool only)
#   kernels   the workbench timed (GB/s against the device copy, TFLOP/s), and our
#             attention against PyTorch's scaled_dot_product_attention
#   layernorm the layernorm workbench alone (part of kernels): bf16 at N 8192 and
#             16384, and the backward's grid swept to choose LN_BWD_BLOCKS
#   llmc      the first part of d12 alone: llm.c and ours at B 16 and 64, stage 1
#   d12       GPT-2 124M side by side with karpathy/llm.c (carried in .carry/llm.c),
#             B 16 and B 64, stages 0-3, fp16, 4 emulated ranks
#   peers     the fair peers at d12, T 1024, bf16, B 16 and 64, 12 steps each: ours,
#             llm.c built with cuDNN (.carry/llm.c, .carry/cudnn-frontend; cuDNN from
#             dev/find_cudnn.sh) and dev/bench_torch_gpt2.py (torch.compile, fused AdamW)
#   memory    d12, stages 0-3, 1 and 4 emulated ranks: accountant vs predictor vs the
#             device's own used memory
#   scale     d24 and d48, bf16 and fp16, stages 1 and 3
#   offload   tokens/s with and without optimizer offload at d48 over 1, 4 and 16
#             micro-steps (device accumulation, delayed update) and d12; the CPU AdamW
#   largest   the largest GPT-2-shaped model for 20 steps, without and with offload
#   nvme      NVMe offload: dev/bench_nvme.cpp's engine / plain sequential (NVME_DIR, default
#             under $OUT), d48 with the states on disk against host memory, and the largest
#             model with the states split between host and disk (5 steps)
#   homework  dev/homework_table.sh on the GPU build, 1 rank and 4 emulated ranks
#   throughput the step-time model on this GPU: make reproduce's check part (each
#             run's operations timed alone into a profile with --calibrate, then its
#             step predicted and measured) and, from that profile, the paper's figures;
#             the profile is copied to $OUT/h100.json (zero/perf/profiles/h100_measured.json
#             is one)
#   interop   the hf test with transformers' GPT2LMHeadModel as the logits reference
#             (ZERO_HF_TRANSFORMERS=1), and make reproduce with the CUDA build
#   pipeline  the emulated dp x tp x pp grid on one GPU (--pp 2 and 4, 1F1B and
#             GPipe, ZeRO 1-3, tp, sp) against the CPU build's losses: fp32 within
#             1e-5, and each grid bit for bit against the GPU's own --pp 1
#   speed     the prepared speed variants (ZERO_VARIANTS, zero/base/variants.h): dev/bench_speed.sh
#             builds, checks the changed kernels (default and variant) against the CPU twins, times
#             d12 B 64 and B 16 with each variant alone and all together (-z 1, then all at -z 2
#             and 3), checks their bits, and tables ncu's time per kernel family; PEERS=1 adds the
#             peers. Its own deadline (LIMIT, 520 s); logs and table under $OUT/speed
#   pack      the logs under $OUT into one archive, $OUT/logs_DATE_TIME.tgz, beside summary.txt
#
# A machine without network access needs data/mobydick, data/gpt2_tokenizer.bin
# and .carry/ copied beside the repository (dev/gpu_carry.sh assembles them).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu}
SUMMARY=$OUT/summary.txt
row() { printf "%-52s %s\n" "$1" "$2" | tee -a "$SUMMARY"; }
section() { echo; echo "##### $* ($(date +%T))"; }
need_build() {  # make knows what is stale (an earlier build's objects are kept)
    make -j"$(nproc)" train_gpt2_zero train_gpt2_zero_cpu >"$OUT/build.log" 2>&1 ||
        { tail -n 30 "$OUT/build.log"; exit 1; }
}

# one trainer run: NAME FLAGS...; a row with tok/s, MFU and memory
train() {
    local name=$1
    shift
    timeout "${RUN_TIMEOUT:-300}" ./train_gpt2_zero -v 0 -s 0 -x "${STEPS:-12}" "$@" --mem_report 1 \
        -o "$OUT/runs/$name" >"$OUT/runs/$name.log" 2>&1
    local rc=$? avg mfu mem
    rm -rf "$OUT/runs/$name"/checkpoint_*  # every run writes one at its end: GBs, never needed here
    avg=$(grep -m 1 "average step time" "$OUT/runs/$name.log" | sed -E 's/.*\(([0-9]+) tok\/s\).*/\1/')
    mfu=$(grep "MFU" "$OUT/runs/$name.log" | tail -n 1 | sed -E 's/.*MFU +([0-9.]+)%.*/\1/')
    mem=$(grep "mem rank 0 device" "$OUT/runs/$name.log" | tail -n 1 | sed -E 's/.*peak +([0-9.]+).*/peak \1 MiB/')
    # offloaded runs: the host arena the accountant reserved beside what the process held (VmHWM)
    host=$(grep "mem rank 0 host" "$OUT/runs/$name.log" | tail -n 1 |
        sed -nE 's/.*reserved +([0-9.]+).*process resident peak +([0-9.]+).*/; host reserved \1 MiB, process resident \2 MiB/p')
    mem=$mem$host
    # offloaded runs: where the last step's host time went (device wait, host adds, norm, CPU AdamW)
    off=$(grep "offload rank 0" "$OUT/runs/$name.log" | tail -n 1 |
        sed -E 's/.*device ([0-9.]+) ms.*after it ([0-9.]+) ms.*norm ([0-9.]+) ms.*AdamW ([0-9.]+) ms.*/; host ms: device \1, adds \2, norm \3, AdamW \4/')
    if [ $rc -ne 0 ]; then row "$name" "FAILED ($rc): $(grep -m 1 -iE 'error|fail' "$OUT/runs/$name.log")"
    else row "$name" "${avg:-?} tok/s, MFU ${mfu:-?}%, $mem$off"; fi
}
# workbench programs LOG PROG...: each timed (dev/cuda/PROG, built), its output in LOG
workbench() {
    local log=$1
    shift
    (cd dev/cuda && for p in "$@"; do echo "=== $p"; timeout 120 ./$p 2>&1; done) >"$log"
}
tokps() { grep -m 1 "average step time" "$OUT/runs/$1.log" 2>/dev/null | sed -E 's/.*\(([0-9]+) tok\/s\).*/\1/'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else printf "?" }'; }
# The peers at d12, T 1024, bf16, 12 steps (section peers; dev/bench_speed.sh runs
# them too). peer_llmc_build: llm.c built with cuDNN (.carry/llm.c,
# .carry/cudnn-frontend; cuDNN from dev/find_cudnn.sh) as its own binary, so that
# section llmc's (no cuDNN) stays apart; sets llmc_bin (empty if it could not be
# built), llmc_why, cudnn_lib and CUDA_DIR.
peer_llmc_build() {
    LLMC=.carry/llm.c
    FE=$PWD/.carry/cudnn-frontend/include
    CUDA_DIR=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
    llmc_bin= llmc_why= cudnn_lib=
    if [ ! -d "$LLMC" ]; then llmc_why="no .carry/llm.c (dev/gpu_carry.sh)"
    elif [ ! -d "$FE" ]; then llmc_why="no .carry/cudnn-frontend/include (dev/gpu_carry.sh)"
    elif ! found=$(sh dev/find_cudnn.sh "$CUDA_DIR"); then llmc_why="no cuDNN (dev/find_cudnn.sh found none)"
    else
        read -r cudnn_inc cudnn_lib cudnn_file <<<"$found"
        echo "cuDNN: $cudnn_inc, $cudnn_lib/$cudnn_file; frontend $FE"
        # PyTorch's wheel has only libcudnn.so.9: -lcudnn links through a symlink
        # folder, and the binary finds the library again by its rpath
        link=$PWD/build/cudnn_link
        mkdir -p "$link"
        ln -sf "$cudnn_lib/$cudnn_file" "$link/libcudnn.so"
        # llm.c's Makefile stops unless ./cudnn-frontend/include (or ~/cudnn-frontend) exists
        [ -e "$LLMC/cudnn-frontend" ] || ln -s ../cudnn-frontend "$LLMC/cudnn-frontend"
        # cudnn-frontend >= 1.2x compiles its own kernels with NVRTC: -lnvrtc
        t0=$(date +%s)
        (cd "$LLMC" && timeout "${LLMC_BUILD_TIMEOUT:-420}" make train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1 \
            -j"$(nproc)" CUDNN_FRONTEND_PATH="$FE" NVCC_INCLUDES="-I$FE -I$cudnn_inc" \
            NVCC_LDLIBS="-L$link -L$cudnn_lib -Xlinker -rpath=$cudnn_lib -lnvrtc" \
            CUDA_OUTPUT_FILE="-o train_gpt2cu_cudnn") >"$OUT/llmc_cudnn_build.log" 2>&1
        rc=$?
        row "llm.c USE_CUDNN=1 build" "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)"), $(($(date +%s) - t0)) s"
        if [ $rc = 0 ] && [ -x "$LLMC/train_gpt2cu_cudnn" ]; then llmc_bin=$LLMC/train_gpt2cu_cudnn
        else
            tail -n 20 "$OUT/llmc_cudnn_build.log"
            llmc_why="cuDNN build failed: $(grep -m 1 -E 'error|Error' "$OUT/llmc_cudnn_build.log" | cut -c 1-120)"
        fi
    fi
}
# peer_llmc B: llm.c with cuDNN at batch B (-v and -s above the 12 steps: section
# llmc's `step % 0` is a SIGFPE; validation on the training shard, as ours is
# smaller than B 64 x T 1024); sets llmc: tok/s, the mean of its last 8 steps (the
# first build cuDNN's graphs), empty if it did not run; a row
peer_llmc() {
    local B=$1 rc
    llmc= llmc_mfu=
    if [ -z "${llmc_bin:-}" ]; then row "llm.c train_gpt2cu d12 B$B (cuDNN)" "not run: ${llmc_why:-not built}"; return; fi
    timeout 240 env LD_LIBRARY_PATH="$cudnn_lib:$CUDA_DIR/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$llmc_bin" -e d12 -b $B -t 1024 -x 12 -v 100 -s 100 -h 0 -i data/mobydick/mobydick_train.bin \
        -j data/mobydick/mobydick_train.bin -o "$OUT/runs/llmc_cudnn_b$B" >"$OUT/runs/llmc_cudnn_b$B.log" 2>&1
    rc=$?
    llmc=$(grep -E "^step +[0-9]+/" "$OUT/runs/llmc_cudnn_b$B.log" | tail -n 8 | sed -E 's/.*\| +([0-9]+) tok\/s.*/\1/' |
        awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }')
    llmc_mfu=$(grep -E "^step +[0-9]+/" "$OUT/runs/llmc_cudnn_b$B.log" | tail -n 1 | sed -nE 's/.*\| +([0-9.]+)% bf16 MFU.*/, MFU \1%/p')
    if [ -n "$llmc" ]; then row "llm.c train_gpt2cu d12 B$B (cuDNN)" "$llmc tok/s$llmc_mfu"
    else row "llm.c train_gpt2cu d12 B$B (cuDNN)" "FAILED ($rc): $(grep -m 1 -iE 'error|fault|abort' "$OUT/runs/llmc_cudnn_b$B.log" | cut -c 1-120)"; fi
}
# peer_torch B: dev/bench_torch_gpt2.py at batch B (compilation in the first step);
# sets torch: the median tok/s of steps 3-12, empty if it failed; a row
peer_torch() {
    local B=$1 rc compile
    timeout "${TORCH_TIMEOUT:-300}" python3 dev/bench_torch_gpt2.py -B $B -T 1024 --steps 12 \
        -i data/mobydick/mobydick_train.bin >"$OUT/runs/torch_gpt2_b$B.log" 2>&1
    rc=$?
    torch=$(sed -nE 's/^torch\.compile GPT-2: median ([0-9]+) tok\/s.*/\1/p' "$OUT/runs/torch_gpt2_b$B.log" | tail -n 1)
    compile=$(sed -nE 's/^first step ([0-9.]+) s.*/\1/p' "$OUT/runs/torch_gpt2_b$B.log")
    if [ -n "$torch" ]; then
        row "torch.compile GPT-2 d12 B$B" "$torch tok/s (median of 10 steps); first step ${compile:-?} s (compilation)"
    else
        tail -n 15 "$OUT/runs/torch_gpt2_b$B.log"
        row "torch.compile GPT-2 d12 B$B" "FAILED ($rc): $(grep -m 1 -E 'Error|error' "$OUT/runs/torch_gpt2_b$B.log" | cut -c 1-120)"
    fi
}
# sourced for the functions above (dev/bench_speed.sh): nothing runs
[ -n "${BENCH_GPU_FUNCTIONS_ONLY:-}" ] && return 0

# `plan` alone writes nothing
[ "${*:-plan}" = plan ] || { mkdir -p "$OUT/runs"; touch "$SUMMARY"; }

run_section() {
case "$1" in
plan)
    cat <<'PLAN'
On a machine with an NVIDIA GPU, from the repository's root (a machine without
network access needs data/mobydick, data/gpt2_tokenizer.bin and .carry/ copied
beside the repository: dev/gpu_carry.sh assembles them where the network is
reachable).

First build and check the machine (1.1 minutes on an H100):
  bash dev/gpu_preflight.sh
Then run these groups in order. Each takes under 10 minutes on an H100
(minutes as measured there, dev/gpu_notes.md; ~ where estimated):
  group 1   bash dev/bench_gpu.sh offload tests          ~4 + 3.5: offload at d48, the delayed
                                                         update; ctest -L gpu
  group 2   bash dev/bench_gpu.sh peers                  ~4.5: llm.c with cuDNN (its build ~1.5,
                                                         its 2 runs 0.5), ours 0.3, torch.compile ~1 a batch size
  group 3   bash dev/bench_gpu.sh largest                8+: the largest model, 20 steps each way
  group 4   SANITIZE_TOOLS=racecheck bash dev/bench_gpu.sh memory sanitize
                                                         2.7 + ~3 (memcheck as well: 7 for sanitize)
  group 5   bash dev/bench_gpu.sh pipeline throughput    0.3 + 6.1
  group 6   bash dev/bench_gpu.sh interop kernels        ~6 (make reproduce at most 5) + 1.5
  group 7   bash dev/bench_gpu.sh homework scale llmc    1.5 + ~3 + 0.6
  group 8   bash dev/bench_gpu.sh nvme                   ~8: the disk, d48 on disk, the largest
                                                         with host + disk (the states need ~55 GiB free)
  group 9   bash dev/bench_gpu.sh speed                  ~8.2: the speed variants and cuDNN's attention
                                                         (build 1.2, checks 1.4, 26 timed d12 runs 4.3,
                                                         ncu table 1.3)
`bash dev/bench_gpu_group.sh N` runs group N under one time limit (LIMIT seconds,
default 560; the preflight first where nothing is built yet), then `pack`, and
prints the summary: $OUT/summary.txt, each group's logs in $OUT/logs_*.tgz (OUT
defaults to out/gpu). Run the groups one after another on the same machine: the build stays.
PLAN
    ;;
tests)
    section "tests: ctest -L gpu"
    need_build
    cmake -S test -B build/test -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1
    # the gpu tests are scripts: nothing to build for them
    (cd build/test && timeout "${TESTS_TIMEOUT:-420}" ctest -L gpu -V 2>&1) >"$OUT/ctest_gpu.log"
    grep -E "Test +#|tests passed|tests failed|FAIL|PASS.*z|relative" "$OUT/ctest_gpu.log" | tail -n 40
    # (a skipped test counts as passed in ctest's line: say how many skipped, e.g. no GPU seen)
    row "ctest -L gpu" "$(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -n 1); $(grep -cE '^[[:space:]]+[0-9]+ - .*\(Skipped\)' "$OUT/ctest_gpu.log") skipped"
    # the CPU AdamW's AVX-512 path, bit for bit against the scalar twin: CI's
    # machines have no AVX-512, the GPU machine's host has
    cmake --build build/test -j"$(nproc)" --target cpu_adamw >"$OUT/cpu_adamw_build.log" 2>&1 &&
        (cd build/test && timeout 300 ctest -R '^cpu_adamw$' -V 2>&1) >"$OUT/ctest_cpu_adamw.log"
    row "ctest cpu_adamw ($(grep -o -m 1 -w avx512f /proc/cpuinfo || echo no avx512f))" \
        "$(grep -E 'tests passed|tests failed' "$OUT/ctest_cpu_adamw.log" | tail -n 1)"
    ;;
sanitize)
    section "sanitize: compute-sanitizer memcheck and racecheck"
    need_build
    make -C dev/cuda -j"$(nproc)" all >/dev/null 2>&1
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        progs="encoder layernorm gelu classifier adamw reduce vocab_parallel attention matmul"
        [ $tool = racecheck ] && progs="encoder layernorm classifier adamw reduce vocab_parallel attention"  # the kernels with shared memory
        for p in $progs; do
            limit=${SANITIZE_TIMEOUT:-40}
            quick=
            # racecheck of the GPT-2 shapes ran past 160 s (attention) and 40 s
            # (vocab_parallel) on an H100: under racecheck only the small and
            # ragged shapes, which still cover every kernel and tile edge
            [ $tool = racecheck ] && { [ $p = attention ] || [ $p = vocab_parallel ]; } && quick=--quick
            [ $p = attention ] && limit=$((limit * 4))
            timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 "dev/cuda/$p" check $quick \
                >"$OUT/runs/sanitize_${tool}_$p.log" 2>&1
            rc=$?
            row "$tool workbench $p $quick" "$([ $rc = 0 ] && echo clean || echo "rc $rc: $(grep -m 1 -E 'ERROR|Invalid|Race|error' "$OUT/runs/sanitize_${tool}_$p.log")")"
        done
        timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 ./train_gpt2_zero -e "L=2,H=4,C=128,V=50257,T=128" \
            -b 2 -t 128 -x 2 -v 0 -s 0 -z 3 --ranks 2 -p bf16 >"$OUT/runs/sanitize_${tool}_train.log" 2>&1
        rc=$?
        # cuBLASLt's own Hopper GEMMs (nvjet_*: TMA and wgmma, whose asynchronous
        # shared-memory traffic racecheck cannot follow) report hazards in every
        # run; ours are every other kernel, and must report none
        log=$OUT/runs/sanitize_${tool}_train.log
        ours=$(grep -E "(Race reported|access at)" "$log" | grep -vc nvjet)
        lib=$(grep -c "Race reported.*nvjet" "$log")
        if [ $rc = 0 ]; then row "$tool train -z 3 --ranks 2 bf16, 2 steps" clean
        elif [ "$tool" = racecheck ] && [ "$ours" = 0 ] && grep -q "RACECHECK SUMMARY" "$log"; then
            row "$tool train -z 3 --ranks 2 bf16, 2 steps" "clean in our kernels; $lib reports in cuBLASLt's nvjet kernels"
        else row "$tool train -z 3 --ranks 2 bf16, 2 steps" "rc $rc: $(grep -m 1 -E 'ERROR|Invalid|Race|error' "$log")"; fi
    done
    ;;
kernels)
    section "kernels: the workbench timed"
    make -C dev/cuda -j"$(nproc)" all >/dev/null 2>&1
    workbench "$OUT/kernels.log" encoder layernorm matmul gelu classifier adamw reduce vocab_parallel attention
    grep -E "===|FAIL|GB/s|TF/s|copy|warm|column sums" "$OUT/kernels.log" | head -n 160
    grep -E "of copy|% of" "$OUT/kernels.log" | while read -r line; do row "kernel" "$line"; done
    section "attention: ours against PyTorch SDPA (B 8, T 1024, 12 heads, hs 64, bf16)"
    timeout 120 python3 dev/bench_sdpa.py 8 1024 12 64 >"$OUT/sdpa.log" 2>&1
    cat "$OUT/sdpa.log"
    ours=$(grep -m 1 "warm: fwd" "$OUT/kernels.log" | sed -E 's/.*fwd\+bwd +([0-9.]+) us.*/\1/')
    for backend in flash cudnn efficient; do
        theirs=$(awk -v b="$backend" '$1 == "sdpa" && $2 == b && NF == 5 { print $5 * 1000 }' "$OUT/sdpa.log")
        [ -n "$theirs" ] && [ -n "$ours" ] &&
            row "attention fwd+bwd ours ${ours} us, SDPA $backend ${theirs} us" \
                "$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.0f%% of its speed (target >= 80%%)", 100 * b / a }')"
    done
    ;;
layernorm)
    section "layernorm: the workbench, the backward's grid swept"
    make -C dev/cuda layernorm >"$OUT/layernorm_build.log" 2>&1 || tail -n 20 "$OUT/layernorm_build.log"
    workbench "$OUT/layernorm.log" layernorm
    grep -E "FAIL|of copy|column sums" "$OUT/layernorm.log" | head -n 80
    grep -E "of copy" "$OUT/layernorm.log" | while read -r line; do row "kernel" "$line"; done
    ;;
d12|llmc)
    section "d12: GPT-2 124M, T 1024, bf16, one GPU"
    need_build
    D="-i data/mobydick/mobydick_train.bin"
    LLMC=.carry/llm.c
    # llm.c's loader asserts that a shard holds B*T+1 tokens; our validation shard
    # (31,776 tokens) is smaller than B 64 x T 1024, so it validates on the training shard
    if [ -d "$LLMC" ]; then
        (cd "$LLMC" && timeout 300 make train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 -j"$(nproc)" >"$OUT/llmc_build.log" 2>&1) ||
            tail -n 20 "$OUT/llmc_build.log"
        for B in 16 64; do
            # -v and -s above the 12 steps, never 0: llm.c takes `step % val_loss_every`
            # unguarded (SIGFPE at -v 0, seen on an H100, 2026-11-23)
            timeout 180 "$LLMC/train_gpt2cu" -e d12 -b $B -t 1024 -x 12 -v 100 -s 100 -h 0 -i data/mobydick/mobydick_train.bin \
                -j data/mobydick/mobydick_train.bin -o "$OUT/runs/llmc_b$B" >"$OUT/runs/llmc_b$B.log" 2>&1
            llmc=$(grep -E "^step +[0-9]+/" "$OUT/runs/llmc_b$B.log" | tail -n 8 | sed -E 's/.*\| +([0-9]+) tok\/s.*/\1/' |
                awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }')
            row "llm.c train_gpt2cu d12 B$B (no cuDNN)" "${llmc:-FAILED} tok/s"
            eval "LLMC_B$B=${llmc:-0}"
        done
    else
        row "llm.c train_gpt2cu" "not run: no .carry/llm.c (dev/gpu_carry.sh)"
    fi
    for B in 16 64; do train "d12_b${B}_z1" $D -e d12 -b $B -t 1024 -z 1 -p bf16; done
    for B in 16 64; do
        v=LLMC_B$B
        row "d12 B$B ours / llm.c tok/s" "$(ratio "$(tokps d12_b${B}_z1)" "${!v:-0}") (target >= 1)"
    done
    [ "$1" = llmc ] && return
    for z in 0 2 3; do train "d12_b16_z$z" $D -e d12 -b 16 -t 1024 -z $z -p bf16; done
    train d12_b16_z1_fp16 $D -e d12 -b 16 -t 1024 -z 1 -p fp16
    train d12_b16_z3_fp16 $D -e d12 -b 16 -t 1024 -z 3 -p fp16
    train d12_b4_z3_n4 $D -e d12 -b 4 -t 1024 -z 3 --ranks 4 -p bf16
    for z in 2 3; do row "d12 B16 stage $z / stage 1 tok/s" "$(ratio "$(tokps d12_b16_z$z)" "$(tokps d12_b16_z1)") (target >= 0.95)"; done
    grep -m 1 "measured matmul peak" "$OUT/runs/d12_b16_z1.log" | sed 's/^/  /'
    ;;
peers)
    # the fair peers: same GPU, same run of the section, same data, batch and sequence
    # length (d12, T 1024, bf16, B 16 and 64, 12 steps each): ours, llm.c built
    # with cuDNN's flash attention, and PyTorch's GPT-2 under torch.compile
    section "peers: d12, T 1024, bf16: ours, llm.c with cuDNN, torch.compile GPT-2"
    need_build
    D="-i data/mobydick/mobydick_train.bin"
    peer_llmc_build
    for B in 16 64; do
        peer_llmc $B
        # ours: the train row carries tok/s, MFU and memory
        train "peers_d12_b${B}_z1" $D -e d12 -b $B -t 1024 -z 1 -p bf16
        peer_torch $B
        ours=$(tokps "peers_d12_b${B}_z1")
        row "d12 B$B ours / llm.c (cuDNN) tok/s" \
            "$([ -n "$llmc" ] && ratio "$ours" "$llmc" || echo "- (llm.c did not run)") (target >= 1.0)"
        row "d12 B$B ours / torch.compile tok/s" "$(ratio "$ours" "${torch:-0}") (target >= 1.2)"
        mfu=$(grep "MFU" "$OUT/runs/peers_d12_b${B}_z1.log" | tail -n 1 | sed -nE 's/.*MFU +([0-9.]+)%.*/\1%/p')
        row "d12 B$B ours: MFU" "${mfu:-?}"
    done
    ;;
memory)
    section "memory: accountant, predictor and cudaMemGetInfo (d12, B 4, T 1024, bf16)"
    need_build
    for n in 1 4; do for z in 0 1 2 3; do
        STEPS=3 train "mem_d12_z${z}_n$n" -e d12 -b 4 -t 1024 -z $z --ranks $n -p bf16
        # rank 0's last report: accountant (= predictor?), reserved, and the device's own used memory
        grep "mem rank 0 device" "$OUT/runs/mem_d12_z${z}_n$n.log" | tail -n 1 | awk -F'|' '
            { f = $2; b = $3; st = $4; gsub(/[^0-9. ]/, " ", f); gsub(/[^0-9. ]/, " ", b); gsub(/[^0-9. ]/, " ", st)
              split(f, F, " "); split(b, B, " "); split(st, S, " ")
              match($0, /reserved +[0-9.]+/); res = substr($0, RSTART + 9, RLENGTH - 9) + 0
              match($0, /device used +[0-9.]+/); used = substr($0, RSTART + 12, RLENGTH - 12) + 0
              grown = -1; if (match($0, /[+-][0-9.]+ since start-up/)) grown = substr($0, RSTART, RLENGTH - 15) + 0
              printf "  fwd %.1f/%.1f bwd %.1f/%.1f step %.1f/%.1f (measured/predicted MiB); reserved %.1f, cudaMemGetInfo used %.1f (difference %.1f), grown since start-up %.1f (beyond reserved %.1f) MiB\n",
                     F[1], F[2], B[1], B[2], S[1], S[2], res, used, used - res, grown, grown - res }' | tee -a "$OUT/memory.txt"
    done; done
    ;;
scale)
    section "scale: d24 and d48"
    need_build
    for p in bf16 fp16; do
        train "d24_${p}_z1" -e d24 -b 8 -t 1024 -z 1 -p "$p"
        train "d48_${p}_z1" -e d48 -b 4 -t 1024 -z 1 -p "$p"
        train "d48_${p}_z3" -e d48 -b 4 -t 1024 -z 3 -p "$p"
    done
    ;;
offload)
    # the CPU AdamW first: it is short, and the d48 runs after it are long
    # (each spends most of its time starting: 1.56B parameters to initialise
    # and upload; the section took 9.3 minutes on an H100 with 12 steps each)
    section "CPU AdamW on this machine's cores"
    mkdir -p build
    g++ -std=c++20 -O3 -march=native -fopenmp -I. dev/bench_cpu_adamw.cpp kernels/cpu/adamw_simd.cpp \
        -o build/bench_cpu_adamw -lpthread &&
        timeout 120 build/bench_cpu_adamw >"$OUT/cpu_adamw.log" 2>&1
    tail -n 12 "$OUT/cpu_adamw.log"
    grep -E "params/s" "$OUT/cpu_adamw.log" | tail -n 4 | while read -r line; do row "cpu adamw" "$line"; done
    section "offload: tokens/s with and without, over tokens per step"
    need_build
    # d48 (1.5B), stage 2, B 4, T 1024, at 1, 4 and 16 micro-steps: no offload;
    # optimizer offload with the micro-steps added on the device; and the same
    # with the delayed parameter update after one ordinary step (the CPU AdamW of
    # step t beside step t+1's forward and backward). Then host accumulation at 16.
    delay="--offload_delay_steps 1"
    for d in 4096 16384 65536; do
        base=(-e d48 -b 4 -t 1024 -d "$d" -z 2 -p bf16)
        STEPS=6 train "d48_d${d}" "${base[@]}"
        STEPS=6 train "d48_d${d}_off" "${base[@]}" --offload_optimizer cpu --offload_grad_accum device
        row "d48 stage 2 -d $d offload / none" "$(ratio "$(tokps "d48_d${d}_off")" "$(tokps "d48_d${d}")") (target >= 0.8)"
        STEPS=6 train "d48_d${d}_dpu" "${base[@]}" --offload_optimizer cpu --offload_grad_accum device $delay
        row "d48 stage 2 -d $d offload, delayed update / none" \
            "$(ratio "$(tokps "d48_d${d}_dpu")" "$(tokps "d48_d${d}")") (target >= 0.8)"
    done
    STEPS=4 train d48_d65536_off_host -e d48 -b 4 -t 1024 -d 65536 -z 2 -p bf16 --offload_optimizer cpu
    row "d48 stage 2 -d 65536 offload, host accumulation / none" \
        "$(ratio "$(tokps d48_d65536_off_host)" "$(tokps d48_d65536)")"
    # GPT-2 124M, where the GPU step is short against the CPU AdamW of 124M parameters
    STEPS=6 train d12_b16 -e d12 -b 16 -t 1024 -z 2 -p bf16
    STEPS=6 train d12_b16_off -e d12 -b 16 -t 1024 -z 2 -p bf16 --offload_optimizer cpu
    STEPS=6 train d12_b16_dpu -e d12 -b 16 -t 1024 -z 2 -p bf16 --offload_optimizer cpu $delay
    row "d12 B 16 stage 2 offload / none; delayed update / none" \
        "$(ratio "$(tokps d12_b16_off)" "$(tokps d12_b16)"); $(ratio "$(tokps d12_b16_dpu)" "$(tokps d12_b16)")"
    ;;
largest)
    section "largest GPT-2-shaped model for 20 steps (C 4096, 32 heads, L raised)"
    need_build
    largest() {  # TAG FLAGS...: the largest L the predictor says fits, then 20 real steps
        local tag=$1 best=0
        shift
        fits() { ./train_gpt2_zero -e "L=$1,H=32,C=4096" -b 1 -t 1024 -p bf16 "${@:2}" --estimate 1 >/dev/null 2>&1; }
        for L in 2 4 8 12 16 20 24 28 32 36 40 44 48 56 64 72 80 96 112 128; do
            fits "$L" "$@" || break
            best=$L
        done
        # then one layer at a time past the coarse step (each layer is 0.2B parameters at C 4096)
        while [ "$best" -gt 0 ] && fits $((best + 1)) "$@"; do best=$((best + 1)); done
        if [ "$best" -gt 0 ]; then
            STEPS=20 RUN_TIMEOUT=420 train "largest_${tag}_L${best}" -e "L=$best,H=32,C=4096" -b 1 -t 1024 -p bf16 "$@"
            row "largest $tag" "L=$best ($(awk -v l="$best" 'BEGIN { printf "%.2fB", (12 * l * 4096 * 4096 + 51328 * 4096) / 1e9 }') parameters)"
        else  # (a refused flag exits as "does not fit" does: say which)
            row "largest $tag" "nothing fits: $(./train_gpt2_zero -e L=2,H=32,C=4096 -b 1 -t 1024 -p bf16 "$@" --estimate 1 2>&1 | grep -m 1 -i error | cut -c 1-110)"
        fi
    }
    largest no_offload -z 3 -r 2
    # the parameters and the gradient shard stay on the device, which has room for them (4 bytes
    # a parameter): the host holds master, m and v, 12 bytes a parameter (with parameter offload
    # it held 16, and on 2026-11-22 the predictor chose L 32, 6.65B)
    largest offload -z 3 -r 2 --offload_optimizer cpu --offload_grad_accum device
    ;;
nvme)
    section "nvme: the disk through the engine, the step with the states on disk, the largest model with host and disk"
    need_build
    make bench_nvme >"$OUT/build_bench_nvme.log" 2>&1 || { tail -n 20 "$OUT/build_bench_nvme.log"; exit 1; }
    NV=${NVME_DIR:-$OUT/nvme_states}  # on the disk to measure (NVME_DIR), default under $OUT
    mkdir -p "$NV"
    # (6) the engine's read and write against one plain sequential O_DIRECT stream, same bytes, same disk
    ./build/bench_nvme "$NV" 4 >"$OUT/runs/bench_nvme.log" 2>&1
    row "disk: engine / plain sequential (4 GiB)" "$(grep -m 1 'engine / plain' "$OUT/runs/bench_nvme.log" | sed 's/.*= //') (target >= 0.9)"
    # (6) the step at d48 (1.5B), stage 2, -d 65536, the gradient shard on the device: states on disk
    # against states in host memory, without and with the delayed update
    base=(-e d48 -b 4 -t 1024 -d 65536 -z 2 -p bf16 --offload_grad_accum device)
    for w in 0 1; do
        STEPS=6 train "nvme_cpu_w$w" "${base[@]}" --offload_optimizer cpu --offload_delay_steps $w
        STEPS=6 train "nvme_disk_w$w" "${base[@]}" --offload_optimizer nvme --nvme_path "$NV" --offload_delay_steps $w
        row "d48 -d 65536 nvme / cpu, delay $w" "$(ratio "$(tokps "nvme_disk_w$w")" "$(tokps "nvme_cpu_w$w")")"
    done
    # (7) the largest GPT-2-shaped model with the states split between host and disk: for each L the
    # largest host share that fits (the predictor's fit check), then 5 steps (a step moves every state
    # byte through the disk twice)
    share() {  # L: the smallest --nvme_fraction that fits, or nothing
        for F in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1; do
            ./train_gpt2_zero -e "L=$1,H=32,C=4096" -b 1 -t 1024 -p bf16 -z 3 -r 2 --offload_optimizer nvme \
                --nvme_path "$NV" --offload_grad_accum device --nvme_fraction $F --estimate 1 >/dev/null 2>&1 &&
                { echo $F; return; }
        done
    }
    best=0
    for L in 32 36 40 44 48 52 56 60 64 68 72 76 80 88 96; do [ -n "$(share $L)" ] && best=$L || break; done
    if [ "$best" -gt 0 ]; then
        F=$(share $best)
        STEPS=5 RUN_TIMEOUT=540 train "largest_nvme_L${best}" -e "L=$best,H=32,C=4096" -b 1 -t 1024 -p bf16 -z 3 -r 2 \
            --offload_optimizer nvme --nvme_path "$NV" --offload_grad_accum device --nvme_fraction "$F"
        row "largest host + disk" "L=$best, --nvme_fraction $F ($(awk -v l="$best" 'BEGIN { printf "%.2fB", (12 * l * 4096 * 4096 + 51328 * 4096) / 1e9 }') parameters; goal >= 12B)"
    else
        row "largest host + disk" "nothing fits at L 32: $(./train_gpt2_zero -e L=32,H=32,C=4096 -b 1 -t 1024 -p bf16 -z 3 -r 2 \
            --offload_optimizer nvme --nvme_path "$NV" --offload_grad_accum device --estimate 1 2>&1 | grep -m 1 -i error | cut -c 1-100)"
    fi
    rm -rf "$NV"
    ;;
homework)
    section "homework table (GPU build)"
    need_build
    for n in 1 4; do
        RANKS=$n OUT="$OUT/runs/homework_n$n" STEPS=6 T=1024 B=4 bash dev/homework_table.sh ./train_gpt2_zero | tee "$OUT/homework_n$n.txt"
    done
    ;;
interop)
    section "interop: our Hugging Face export in transformers' GPT2LMHeadModel; make reproduce on the GPU build"
    need_build
    make -j"$(nproc)" cpu >"$OUT/build_cpu.log" 2>&1
    cmake -S test -B build/test -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1
    cmake --build build/test -j"$(nproc)" --target hf >"$OUT/hf_build.log" 2>&1
    # the test's logits check, with transformers as the reference instead of our PyTorch GPT-2
    py=$(command -v python3)
    if "$py" -c 'import transformers' 2>/dev/null; then
        (cd build/test && ZERO_PYTHON="$py" ZERO_HF_TRANSFORMERS=1 timeout 300 ctest -R '^hf$' -V 2>&1) >"$OUT/ctest_hf_transformers.log"
        row "our export -> GPT2LMHeadModel, logits within 1e-5" \
            "$(grep -E 'tests passed|tests failed' "$OUT/ctest_hf_transformers.log" | tail -n 1)"
    else
        row "our export -> GPT2LMHeadModel" "not run: $py has no transformers"
    fi
    # the reproduction with the CUDA build (bf16, T 1024), figures and report under $OUT
    (time timeout "${REPRODUCE_TIMEOUT:-300}" make reproduce) >"$OUT/reproduce.log" 2>&1
    cp -r out/reproduce "$OUT/reproduce" 2>/dev/null
    row "make reproduce (GPU build)" "$(grep real "$OUT/reproduce.log" | tail -n 1 | awk '{print $2}'), $(tail -n 4 "$OUT/reproduce.log" | head -n 1)"
    ;;
throughput)
    section "throughput: the step-time model calibrated and checked on this GPU"
    need_build
    make build/reproduce >"$OUT/reproduce_build.log" 2>&1
    # under a deadline (DEADLINE, epoch seconds, as dev/bench_gpu_group.sh sets it),
    # stop 15 s before it: the runs checked so far keep their profile (saved
    # after each run) and their lines
    left=540
    [ -n "${DEADLINE:-}" ] && left=$((DEADLINE - $(date +%s) - 15))
    timeout "${THROUGHPUT_TIMEOUT:-$left}" build/reproduce --trainer ./train_gpt2_zero --device GPU --parts check \
        --out "$OUT/throughput" >"$OUT/throughput.log" 2>&1
    cp "$OUT/throughput/measured_profile.json" "$OUT/h100.json" 2>/dev/null
    grep -E "throughput check" "$OUT/throughput.log" | sed 's/^/  /'
    # the median and largest |error| over the runs that finished (report.md has them too, if the part ended),
    # less those the check names a busy machine's, which report.md leaves out as well
    busy=$(grep -c "throughput check.*a busy machine" "$OUT/throughput.log")
    row "throughput model vs measured (GPU)" "$(grep -E "throughput check" "$OUT/throughput.log" | grep -v "a busy machine" |
        sed -nE 's/.*\(([-+][0-9.]+)%\).*/\1/p' | tr -d +- | sort -g | awk '{ e[++n] = $1 }
        END { if (n == 0) print "no run finished"; else printf "%d runs: median |error| %.1f%%, max %.1f%%", n,
              n % 2 ? e[(n + 1) / 2] : (e[n / 2] + e[n / 2 + 1]) / 2, e[n] }')$([ "$busy" -gt 0 ] && echo "; $busy left out, timed on a busy machine")"
    ;;
pipeline)
    section "pipeline: the emulated 3-D grid on one GPU against the CPU build's losses"
    need_build
    # a small GPT-2 on Moby-Dick, 4 micro-batches a step; each grid's --pp 1 twin
    # (the same tp) on the GPU, and the CPU build's --pp 1 as the reference
    pp_flags="-e L=4,H=4,C=128,V=50257,T=64 -b 4 -t 64 -d 1024 -x 6 -v 0 -s 0 -n -1 -l 1e-3 -p fp32"
    losses() { grep -E '^step +[0-9]+/' "$1" | awk '{print $5}'; }
    # the largest relative difference between two runs' losses ("?" if either has none)
    loss_gap() {
        paste <(losses "$1") <(losses "$2") | awk '
            { n++; d = $1 - $2; if (d < 0) d = -d; if ($2 != 0 && d / $2 > worst) worst = d / $2 }
            END { if (n == 0) print "?"; else printf "%.2g", worst }'
    }
    for grid in "-z 2 --tp 2 --pp 4" "-z 3 --tp 2 --pp 2 --sp 1 --pp_schedule gpipe" "-z 1 --pp 4" \
                "-z 3 --pp 2 --pp_schedule gpipe"; do
        tp=$(echo "$grid" | sed -nE 's/.*--tp ([0-9]+).*/\1/p'); tp=${tp:-1}
        pp=$(echo "$grid" | sed -nE 's/.*--pp ([0-9]+).*/\1/p')
        flat=$(echo "$grid" | sed -E 's/--pp [0-9]+/--pp 1/; s/--pp_schedule [a-z0-9]+//')
        name=pp_$(echo "$grid" | tr -d ' -' | tr -c 'a-z0-9_\n' '_')
        timeout 300 ./train_gpt2_zero_cpu $pp_flags $flat --ranks "$tp" >"$OUT/runs/${name}_cpu.log" 2>&1
        timeout 300 ./train_gpt2_zero $pp_flags $flat --ranks "$tp" >"$OUT/runs/${name}_gpu_pp1.log" 2>&1
        timeout 300 ./train_gpt2_zero $pp_flags $grid --ranks $((tp * pp)) >"$OUT/runs/${name}_gpu.log" 2>&1
        if cmp -s <(losses "$OUT/runs/${name}_gpu.log") <(losses "$OUT/runs/${name}_gpu_pp1.log") &&
            [ -n "$(losses "$OUT/runs/${name}_gpu.log")" ]; then same="bit-identical"; else same="DIFFERENT"; fi
        row "GPU $grid" "losses $same to the GPU's --pp 1, within $(loss_gap "$OUT/runs/${name}_gpu.log" "$OUT/runs/${name}_cpu.log") of the CPU build's (fp32: 1e-5)"
        grep -m 1 "pipeline bubble" "$OUT/runs/${name}_gpu.log" | sed 's/^/  /'
    done
    ;;
speed)
    section "speed: the prepared variants, each alone and all together (dev/bench_speed.sh)"
    OUT="$OUT/speed" bash dev/bench_speed.sh
    row "speed variants" "table: $OUT/speed/table.txt (printed above)"
    ;;
pack)  # the logs so far in one archive, one file to copy off the machine; the summary, the
       # preflight's log and the archives of earlier packs stay beside it
    tgz=logs_$(date +%Y%m%d_%H%M%S).tgz
    tmp=$(mktemp)
    tar czf "$tmp" -C "$OUT" --exclude='logs_*.tgz' --exclude='checkpoint_*' . 2>/dev/null &&
        find "$OUT" -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name preflight.log ! -name 'logs_*.tgz' -exec rm -rf {} + &&
        mv "$tmp" "$OUT/$tgz" && chmod 644 "$OUT/$tgz"
    return
    ;;
*) echo "unknown section '$1' (plan tests sanitize kernels d12 llmc peers memory scale offload largest nvme homework interop throughput pipeline speed pack)" >&2; exit 2 ;;
esac
}

[ $# -gt 0 ] || set -- plan
for s in "$@"; do run_section "$s"; done
[ "${1:-plan}" = plan ] || [ "$*" = pack ] || { echo; echo "##### summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null))"; cat "$SUMMARY"; }

#!/usr/bin/env bash
# Whole training runs on the GPU against the CPU build (CTest: gpu_training,
# label gpu). Skipped (77) without an NVIDIA GPU.
#
#   1. one model, 10 steps, fp32: the CUDA trainer's losses equal the CPU
#      trainer's within 1e-5 relative; bf16 within 1e-2;
#   2. stages 0-3 at N = 1, 2, 4 ranks emulated on the one GPU give the CPU
#      build's losses (fp32, 1e-5);
#   3. fp16 from an absurd loss scale (2^40): the gradients overflow, the first
#      steps are skipped on every rank, the scale halves after the hysteresis,
#      training then goes on, and every parameter stays finite;
#   4. tensor parallelism (--tp 2 and 4, x 1-2 data-parallel ranks, stages 0
#      and 3, with and without --sp) emulated on the GPU gives the CPU build's
#      losses for the same grid (fp32, 1e-5; bf16 within 1e-2 of them);
#   5. a checkpoint saved on the GPU (stage 3, 2 ranks, bf16) and resumed there
#      ends bit-identical to the uninterrupted run;
#   6. optimizer offload on the GPU (stages 2 and 3, 2 ranks, 2 micro-steps,
#      added on the host or on the device, and with the delayed parameter
#      update, whose CPU AdamW runs on its own thread beside the next step's
#      kernels) gives the CPU build's losses (fp32, 1e-5): an update read or
#      written out of order on the GPU would not.
#
#   test/run_gpu_train_tests.sh [REPO_ROOT]
set -u
REPO=$(cd "${1:-$(dirname "$0")/..}" && pwd)
WORK=$PWD/gpu_training
mkdir -p "$WORK"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || skip "no NVIDIA GPU"
[ -f "$REPO/data/mobydick/mobydick_train.bin" ] || skip "no data (make data)"
make -C "$REPO" -j "$(nproc)" train_gpt2_zero train_gpt2_zero_cpu >"$WORK/build.log" 2>&1 || {
    tail -n 30 "$WORK/build.log"
    fail "cannot build the trainers"
}
GPU=$REPO/train_gpt2_zero
CPU=$REPO/train_gpt2_zero_cpu
FLAGS=(-e "L=2,H=4,C=64,V=50257,T=64" -i "$REPO/data/mobydick/mobydick_train.bin" -t 64 -x 10 -v 0 -s 0
       -l 1e-3 -u 2 -c 0.1 --seed 7)

# compare A B TOL: the trl lines of two main.log files, max relative difference <= TOL
compare() {
    awk -v tol="$3" -F'trl:' '
        FNR == NR { if (NF == 2) a[n++] = $2; next }
        NF == 2 { b[m++] = $2 }
        END {
            if (n == 0 || n != m) { printf "%d vs %d losses\n", n, m; exit 1 }
            worst = 0
            for (i = 0; i < n; i++) { d = (a[i] - b[i]) / b[i]; if (d < 0) d = -d; if (d > worst) worst = d }
            printf "max relative difference %.3g over %d losses\n", worst, n
            exit worst > tol
        }' "$1" "$2"
}

run() {  # run NAME BINARY FLAGS...
    local name=$1 bin=$2
    shift 2
    rm -rf "${WORK:?}/$name"
    "$bin" "${FLAGS[@]}" "$@" -o "$WORK/$name" >"$WORK/$name.out" 2>&1 || {
        tail -n 20 "$WORK/$name.out"
        fail "$name failed"
    }
}

echo "== 1. one GPU against the CPU build"
run cpu_fp32 "$CPU" -b 4 -p fp32
run gpu_fp32 "$GPU" -b 4 -p fp32
compare "$WORK/gpu_fp32/main.log" "$WORK/cpu_fp32/main.log" 1e-5 || fail "fp32 GPU losses differ from the CPU build"
run gpu_bf16 "$GPU" -b 4 -p bf16
compare "$WORK/gpu_bf16/main.log" "$WORK/cpu_fp32/main.log" 1e-2 || fail "bf16 GPU losses are too far from fp32"

echo "== 2. stages 0-3 at N = 1, 2, 4 emulated on the GPU"
for n in 1 2 4; do
    for z in 0 1 2 3; do
        run "gpu_z${z}_n${n}" "$GPU" -p fp32 -z "$z" --ranks "$n" -b $((8 / n))
        run "cpu_z${z}_n${n}" "$CPU" -p fp32 -z "$z" --ranks "$n" -b $((8 / n))
        printf "z%d n%d: " "$z" "$n"
        compare "$WORK/gpu_z${z}_n${n}/main.log" "$WORK/cpu_z${z}_n${n}/main.log" 1e-5 ||
            fail "stage $z at $n ranks: GPU and CPU differ"
    done
done

echo "== 3. fp16 overflow"
run fp16 "$GPU" -p fp16 -z 2 --ranks 2 -b 4 -x 40 --initial_scale_power 40
grep -c "(skipped)" "$WORK/fp16.out" | grep -qv '^0$' || fail "no step was skipped at scale 2^40"
first=$(grep -m 2 "| scale" "$WORK/fp16.out" | grep -c "scale 1099511627776 (skipped)")
[ "$first" = 2 ] || fail "the first two steps must be skipped at 2^40 (hysteresis 2)"
grep -q "scale 549755813888 (skipped)" "$WORK/fp16.out" || fail "the scale did not halve after the hysteresis"
grep "| scale" "$WORK/fp16.out" | tail -n 1 | grep -qv skipped || fail "training never recovered from the overflow"
"$GPU" --consolidate "$WORK/fp16/checkpoint_00000040" >/dev/null || fail "cannot consolidate the fp16 checkpoint"
# every master weight finite: od prints the floats; look for inf or nan
if od -A n -t f4 -j 1024 -v "$WORK/fp16/checkpoint_00000040/model_fp32.bin" | grep -qiE 'inf|nan'; then
    fail "inf/NaN reached the master weights"
fi
echo "== 4. tensor parallelism emulated on the GPU"
for t in 2 4; do
    for d in 1 2; do
        for z in 0 3; do
            for sp in 0 1; do
                grid=(-z "$z" --ranks $((t * d)) --tp "$t" --sp "$sp" -b $((8 / d)))
                name="tp${t}_d${d}_z${z}_sp${sp}"
                run "gpu_$name" "$GPU" "${grid[@]}" -p fp32
                run "cpu_$name" "$CPU" "${grid[@]}" -p fp32
                printf "%s fp32: " "$name"
                compare "$WORK/gpu_$name/main.log" "$WORK/cpu_$name/main.log" 1e-5 ||
                    fail "--tp $t x $d, stage $z, --sp $sp: GPU and CPU differ"
                run "gpu_${name}_bf16" "$GPU" "${grid[@]}" -p bf16
                printf "%s bf16: " "$name"
                compare "$WORK/gpu_${name}_bf16/main.log" "$WORK/cpu_$name/main.log" 1e-2 ||
                    fail "--tp $t x $d, stage $z, --sp $sp: bf16 on the GPU is too far from fp32"
            done
        done
    done
done

echo "== 5. a checkpoint saved on the GPU and resumed there"
# 10 steps with checkpoints at 5 and 10; then the step-5 checkpoint alone, in a
# directory of its own, resumed to step 10: every kernel is deterministic from
# run to run (the workbench checks reruns bit for bit), so step 10's model and
# optimizer files must be the uninterrupted run's, byte for byte
resume_grid=(-z 3 --ranks 2 -b 4 -p bf16 -n 5)
run resume_full "$GPU" "${resume_grid[@]}"
rm -rf "$WORK/resume_part"
mkdir -p "$WORK/resume_part"
cp -r "$WORK/resume_full/checkpoint_00000005" "$WORK/resume_part/"
"$GPU" "${FLAGS[@]}" "${resume_grid[@]}" -y 1 -o "$WORK/resume_part" >"$WORK/resume_part.out" 2>&1 || {
    tail -n 20 "$WORK/resume_part.out"
    fail "resuming the GPU's step-5 checkpoint failed"
}
grep -q "^training 10 steps from step 5" "$WORK/resume_part.out" || fail "the resumed run did not start at step 5"
for f in model.bin optim_rank00000.bin optim_rank00001.bin; do
    cmp -s "$WORK/resume_full/checkpoint_00000010/$f" "$WORK/resume_part/checkpoint_00000010/$f" ||
        fail "resumed at step 5, step 10's $f differs from the uninterrupted run's"
done
echo "resumed from step 5: step 10's model and optimizer files equal the uninterrupted run's"

echo "== 6. optimizer offload on the GPU, the delayed parameter update too"
for z in 2 3; do
    for extra in "--offload_grad_accum host" "--offload_grad_accum device" \
                 "--offload_grad_accum device --offload_delay_steps 2"; do
        name="offload_z${z}_$(echo "$extra" | tr -d ' -' | tr -c 'a-z0-9\n' '_')"
        grid=(-z "$z" --ranks 2 -b 4 -d 1024 -p fp32 --offload_optimizer cpu $extra)
        run "gpu_$name" "$GPU" "${grid[@]}"
        run "cpu_$name" "$CPU" "${grid[@]}"
        printf "%s: " "$name"
        compare "$WORK/gpu_$name/main.log" "$WORK/cpu_$name/main.log" 1e-5 ||
            fail "stage $z offload ($extra): GPU and CPU differ"
    done
done

echo "all GPU training checks passed"

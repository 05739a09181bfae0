#!/usr/bin/env bash
# The NCCL backend under a real launcher (CTest: nccl_launch, label gpu).
#
#   test/run_nccl_tests.sh [REPO_ROOT]
#
# Needs an NVIDIA GPU, Open MPI's mpirun and a buildable ./train_gpt2_zero;
# without any of them it exits 77 (skipped). It runs in the current directory
# (CTest's work directory) and builds in REPO_ROOT.
#
#   1. Two ranks on one GPU (every machine: CUDA_VISIBLE_DEVICES=0 for both, which
#      is the only choice on a one-GPU machine) must fail, nonzero, with the
#      rendezvous's duplicate-GPU message on stderr.
#   2. With two or more GPUs: `mpirun -np 2 ./train_gpt2_zero -z 3` on a tiny
#      model must log the same losses (main.log, 1e-4 relative) as the same run
#      emulated as --ranks 2 in one process: by the CPU build, and by the CUDA
#      build on one GPU.
set -u

REPO=$(cd "${1:-$(dirname "$0")/..}" && pwd)
WORK=$PWD/nccl_launch
TOL=${NCCL_TEST_TOL:-1e-4}
STAGES=${NCCL_TEST_STAGES:-3}
mkdir -p "$WORK"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- what we need --------------------------------------------------------------
ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
[ "$ngpu" -ge 1 ] || skip "no NVIDIA GPU (nvidia-smi -L lists none)"
command -v mpirun >/dev/null 2>&1 || skip "no mpirun (apt-get install openmpi-bin)"
mpirun --version 2>&1 | grep -q "Open MPI" ||
    skip "mpirun is not Open MPI's (zero/comm/launcher.h reads OMPI_COMM_WORLD_*, Slurm or RANK/WORLD_SIZE variables)"
if ! make -C "$REPO" -j "$(nproc)" train_gpt2_zero >"$WORK/build.log" 2>&1; then
    tail -n 20 "$WORK/build.log"
    skip "./train_gpt2_zero cannot be built here (log: $WORK/build.log)"
fi
GPU_BIN=$REPO/train_gpt2_zero
echo "$ngpu GPU(s); $(mpirun --version 2>&1 | head -n 1)"

MPIRUN=(mpirun -np 2 --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

free_port() {  # a port unlikely to be in use (the rendezvous says clearly if it is)
    echo $((20000 + ($$ * 7 + RANDOM) % 30000))
}
launch_env() {  # mpirun -x options: where rank 0 listens, and a short rendezvous timeout
    echo -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$(free_port)" -x ZERO_BOOTSTRAP_TIMEOUT=120
}

# --- data: the Moby-Dick shards of `make data`, a small model ----------------------
[ -f "$REPO/data/mobydick/mobydick_train.bin" ] || skip "no data/mobydick shards (make data)"
MODEL="L=2,H=4,C=64,V=50257,T=64"
DATA=(-i "$REPO/data/mobydick/mobydick_train.bin" -j "$REPO/data/mobydick/mobydick_val.bin")
FLAGS=(-e "$MODEL" "${DATA[@]}" -b 4 -t 64 -x 8 -v 4 -m 2 -s 0 -l 1e-3 -p fp32 --seed 1337)

# --- 1. two ranks on one GPU ------------------------------------------------------
echo "== two ranks on one GPU must fail with the duplicate-GPU message"
# shellcheck disable=SC2046
timeout 600 "${MPIRUN[@]}" $(launch_env) -x CUDA_VISIBLE_DEVICES=0 "$GPU_BIN" "${FLAGS[@]}" -z 3 \
    -o "$WORK/dup" >"$WORK/dup.out" 2>"$WORK/dup.err"
rc=$?
[ "$rc" -ne 0 ] || fail "mpirun -np 2 on one GPU succeeded; it must fail (see $WORK/dup.out)"
[ "$rc" -ne 124 ] || fail "mpirun -np 2 on one GPU hung (killed after 600 s)"
msg="error: ranks 0 and 1 both use GPU .* on host .*: NCCL cannot run two ranks on one GPU; to emulate N ranks on one GPU run one process with --ranks N"
if ! grep -q -- "$msg" "$WORK/dup.err"; then
    echo "--- stderr:"; cat "$WORK/dup.err"
    fail "the duplicate-GPU message is not on stderr"
fi
echo "ok: exit $rc, $(grep -c -- "$msg" "$WORK/dup.err") rank(s) printed: $(grep -m 1 -- "$msg" "$WORK/dup.err")"

if [ "$ngpu" -lt 2 ]; then
    echo "one GPU: the two-GPU comparison is skipped"
    exit 0
fi

# --- 2. NCCL across two GPUs == emulated ranks -------------------------------------
if ! make -C "$REPO" -j "$(nproc)" train_gpt2_zero_cpu >"$WORK/build_cpu.log" 2>&1; then
    tail -n 20 "$WORK/build_cpu.log"
    fail "./train_gpt2_zero_cpu does not build"
fi

# compare A B: every "s:<step> <key>:<value>" line of main.log A has the same
# line in B with a value within TOL (relative), and the two have the same lines
compare_logs() {
    awk -v tol="$TOL" -v A="$1" -v B="$2" '
        FNR == NR { a[$1 " " substr($2, 1, index($2, ":"))] = substr($2, index($2, ":") + 1); na++; next }
        {
            k = $1 " " substr($2, 1, index($2, ":")); v = substr($2, index($2, ":") + 1); nb++
            if (!(k in a)) { printf "%s has %s but %s does not\n", B, k, A; bad++; next }
            d = a[k] - v; if (d < 0) d = -d
            m = v < 0 ? -v : v; if (m < 1e-12) m = 1e-12
            if (d / m > tol) { printf "%s: %s vs %s (relative %.2e > %s)\n", k, a[k], v, d / m, tol; bad++ }
            if (d / m > worst) worst = d / m
        }
        END {
            if (na != nb || na == 0) { printf "%d lines in %s, %d in %s\n", na, A, nb, B; bad++ }
            printf "  %d values, worst relative difference %.2e\n", nb, worst
            exit bad > 0
        }' "$1" "$2"
}

for z in $STAGES; do
    echo "== stage $z: mpirun -np 2 (NCCL, 2 GPUs) vs --ranks 2 (emulated)"
    rm -rf "$WORK/nccl_z$z" "$WORK/cpu_z$z" "$WORK/gpu_z$z"
    # shellcheck disable=SC2046
    timeout 600 "${MPIRUN[@]}" $(launch_env) "$GPU_BIN" "${FLAGS[@]}" -z "$z" -o "$WORK/nccl_z$z" \
        >"$WORK/nccl_z$z.out" 2>&1 || { tail -n 30 "$WORK/nccl_z$z.out"; fail "the NCCL run failed (stage $z)"; }
    grep -q "^NCCL " "$WORK/nccl_z$z.out" || fail "the mpirun run did not use NCCL (no 'NCCL' line in its output)"
    timeout 600 "$REPO/train_gpt2_zero_cpu" "${FLAGS[@]}" -z "$z" --ranks 2 -o "$WORK/cpu_z$z" \
        >"$WORK/cpu_z$z.out" 2>&1 || { tail -n 30 "$WORK/cpu_z$z.out"; fail "the CPU emulated run failed (stage $z)"; }
    CUDA_VISIBLE_DEVICES=0 timeout 600 "$GPU_BIN" "${FLAGS[@]}" -z "$z" --ranks 2 -o "$WORK/gpu_z$z" \
        >"$WORK/gpu_z$z.out" 2>&1 || { tail -n 30 "$WORK/gpu_z$z.out"; fail "the GPU emulated run failed (stage $z)"; }
    echo " NCCL vs CPU --ranks 2:"
    compare_logs "$WORK/nccl_z$z/main.log" "$WORK/cpu_z$z/main.log" || fail "NCCL and CPU-emulated losses differ"
    echo " NCCL vs GPU --ranks 2:"
    compare_logs "$WORK/nccl_z$z/main.log" "$WORK/gpu_z$z/main.log" || fail "NCCL and GPU-emulated losses differ"
done
echo "ok"

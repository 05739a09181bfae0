#!/bin/sh
# dev/bench_speed.sh's own logic without a GPU (CTest: bench_speed): its `time`
# part against a stand-in trainer that prints the step lines a run would, then
# its table. The table must carry every run's tok/s and ratio, say the
# bit-identical variants kept the default's losses and norms and the runs
# twice were equal; and where the stand-in changes fused_optimizer's bits, or
# leaves a variant or cuDNN's attention off, the table must say so. Also dev/kernel_table.py's
# self-test (its parsing of ncu's CSV).
#
#   sh test/test_bench_speed.sh REPO_ROOT
set -u
ROOT=${1:?usage: test_bench_speed.sh REPO_ROOT}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
check() {  # WHAT PATTERN FILE: a line of FILE matches PATTERN
    if grep -qE "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1 (no line matches '$2')"; fail=1; fi
}

# The stand-in: 12 step lines and the average line; tok/s grows with the variants
# named; BREAK names a variant whose losses it moves, OFF one it does not announce
# (cudnn: --attention cudnn's header line). Its --attention cudnn sums another way.)
cat >"$WORK/trainer" <<'EOF'
#!/bin/sh
B=16 att=own
while [ $# -gt 0 ]; do [ "$1" = -b ] && B=$2; [ "$1" = --attention ] && att=$2; shift; done
v=${ZERO_VARIANTS:-}
[ $att = cudnn ] && [ "${OFF:-}" != cudnn ] && echo "attention: cuDNN's fused flash attention (--attention cudnn)"
[ -n "$v" ] && [ "$v" != "${OFF:-}" ] && echo "variants on (ZERO_VARIANTS): $v"
tok=$((B * 30000 + ${#v} * 100))
s=1
while [ $s -le 12 ]; do
    loss="10.90$s"
    [ -n "${BREAK:-}" ] && [ "$v" = "$BREAK" ] && loss="10.91$s"
    [ $att = cudnn ] && loss="10.92$s"
    mfu=50.$((s % 3))  # (the first step, 10%, is left out of the median)
    [ $s = 1 ] && mfu=10.0
    echo "step $s/12 | loss $loss | norm 1.2$s | lr 3.00e-04 | 30.00 ms | $tok tok/s | MFU $mfu% | mem 9.0 MiB"
    s=$((s + 1))
done
echo "average step time 30.00 ms ($tok tok/s) over 11 steps; 20 steps take 0.60 s"
EOF
chmod +x "$WORK/trainer"

cd "$ROOT" || exit 2
TRAINER="$WORK/trainer" OUT="$WORK/ok" LIMIT=600 bash dev/bench_speed.sh time >"$WORK/ok.log" 2>&1
T=$WORK/ok/table.txt
check "the default's row" '^  default \(-z 1\) +480000 tok/s +1\.000  MFU  50\.1%' "$T"
check "fused_optimizer: the default's bits" "^  fused_optimizer .*losses, norms = the default's" "$T"
check "residual_ln: the default's bits" "^  residual_ln .*losses, norms = the default's" "$T"
check "device_loss: the default's norms" "^  device_loss .*norms = the default's, losses within 0" "$T"
check "all six at -z 3 against -z 1" '^  all six, -z 3 .*-z 3 / -z 1 with all: 1\.000' "$T"
check "the default twice: the same bits" "^  default again .*bit-identical to the first" "$T"
check "all six twice at B 16: the same bits" "^  all six again .*bit-identical to the first" "$T"
check "B 64's table" '^d12 B 64, T 1024' "$T"
check "cuDNN's attention: its sums" "^  --attention cudnn .*other sums: losses within 0\.02 of the default" "$T"
check "all six with cuDNN's attention against all six" "^  all six, --attention cudnn .*/ all six with ours: 1\.000" "$T"
check "cuDNN's attention twice at B 16: the same bits" "^  --attention cudnn again .*bit-identical to the first" "$T"
if grep -q "NOT ON\|DIFFER\|FAILED" "$T"; then echo "FAIL: a clean run's table flags something:"; cat "$T"; fail=1; fi

BREAK=fused_optimizer OFF=dbias_blocks TRAINER="$WORK/trainer" OUT="$WORK/bad" LIMIT=600 bash dev/bench_speed.sh time \
    >"$WORK/bad.log" 2>&1
check "moved bits are flagged" "^  fused_optimizer .*BITS DIFFER from the default" "$WORK/bad/table.txt"
check "a variant not on is flagged" "^  dbias_blocks .*VARIANTS NOT ON" "$WORK/bad/table.txt"
OFF=cudnn TRAINER="$WORK/trainer" OUT="$WORK/bad2" LIMIT=600 bash dev/bench_speed.sh time >"$WORK/bad2.log" 2>&1
check "cuDNN's attention not on is flagged" "^  --attention cudnn .*ATTENTION NOT AS NAMED" "$WORK/bad2/table.txt"

python3 dev/kernel_table.py --self-test || fail=1
[ $fail = 0 ] && echo "bench_speed: ok" || { echo "bench_speed: FAILED"; cat "$WORK/ok.log"; }
exit $fail

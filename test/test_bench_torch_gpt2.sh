#!/bin/sh
# dev/bench_torch_gpt2.py, the PyTorch GPT-2 that section `peers` of
# dev/bench_gpu.sh times against ours on a GPU, in its tiny CPU mode (CTest:
# bench_torch_gpt2, label cpu): with Debian's torch 1.13 (no SDPA, no
# torch.compile) it must read the llm.c token shard, train 2 steps and print
#   1. its final line as section `peers` parses it:
#      "<torch.compile|eager> GPT-2: median N tok/s over K steps";
#   2. a finite loss at each step, the second below the first's +10% (it trains);
#   3. and it must refuse a file that is not a token shard.
# Skipped (77) without torch in $ZERO_PYTHON (/usr/bin/python3), or
# without data/mobydick (make data).
#
#   test/test_bench_torch_gpt2.sh [REPO_ROOT]
set -u
REPO=$(cd "${1:-$(dirname "$0")/..}" && pwd)
PY=${ZERO_PYTHON:-/usr/bin/python3}
DATA=$REPO/data/mobydick/mobydick_train.bin
fail() { echo "FAIL: $*" >&2; exit 1; }

"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $PY has no torch (Debian's python3-torch)"; exit 77; }
[ -f "$DATA" ] || { echo "SKIP: no $DATA (make data)"; exit 77; }

LOG=$PWD/bench_torch_gpt2.log
"$PY" "$REPO/dev/bench_torch_gpt2.py" --device cpu --no_compile --layers 2 --width 64 --heads 2 \
    --steps 2 -B 2 -T 32 -i "$DATA" >"$LOG" 2>&1
rc=$?
cat "$LOG"
[ $rc = 0 ] || fail "exit status $rc"

last=$(tail -n 1 "$LOG")
echo "$last" | grep -qE '^(torch\.compile|eager) GPT-2: median [0-9]+ tok/s over [0-9]+ steps$' ||
    fail "final line '$last' is not '<torch.compile|eager> GPT-2: median N tok/s over K steps'"

# the losses as printed (%.6f: nan and inf print as words, so digits mean finite)
losses=$(sed -nE 's/^step +[0-9]+\/2 \| loss ([^ ]+) \|.*/\1/p' "$LOG")
[ "$(echo "$losses" | grep -c .)" = 2 ] || fail "expected 2 step lines with a loss, got: $losses"
echo "$losses" | grep -qvE '^[0-9]+\.[0-9]+$' && fail "a loss is not finite: $losses"
first=$(echo "$losses" | head -n 1)
second=$(echo "$losses" | tail -n 1)
awk -v a="$first" -v b="$second" 'BEGIN { exit !(b < 1.1 * a) }' ||
    fail "loss went from $first to $second: not below the first step's +10%"
echo "losses: $first -> $second"

# a file that is not a token shard: a clear error, not a trained model
head -c 2048 /dev/zero >"$PWD/not_a_shard.bin"
if "$PY" "$REPO/dev/bench_torch_gpt2.py" --device cpu --no_compile --layers 1 --width 32 --heads 1 --steps 1 \
    -B 1 -T 8 -i "$PWD/not_a_shard.bin" >"$PWD/not_a_shard.log" 2>&1; then
    fail "it trained on a file of zeros"
fi
grep -q "not an llm.c token shard" "$PWD/not_a_shard.log" || fail "no clear error for a bad shard: $(cat "$PWD/not_a_shard.log")"
echo "PASS"

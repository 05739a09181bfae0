#!/usr/bin/env bash
# The classic ZeRO homework table, from the trainer's own reports: rank 0's
# memory after forward, after backward and after the optimizer step, and the
# time per 20 iterations, for stage 1, 2, 2 + offload, 3, 3 + offload, 3 + fp16.
#
#   dev/homework_table.sh [TRAINER] [extra trainer flags...]
#
# TRAINER defaults to ./train_gpt2_zero if it was built, else ./train_gpt2_zero_cpu.
# Environment: MODEL (default d12), RANKS (emulated ranks, default 4), B, T,
# STEPS (default 6), PRECISION (default: the build's), OUT (default /tmp/homework).
set -eu
cd "$(dirname "$0")/.."
TRAINER=${1:-$([ -x ./train_gpt2_zero ] && nvidia-smi -L >/dev/null 2>&1 && echo ./train_gpt2_zero || echo ./train_gpt2_zero_cpu)}
[ $# -gt 0 ] && shift
MODEL=${MODEL:-d12} RANKS=${RANKS:-4} B=${B:-1} T=${T:-64} STEPS=${STEPS:-6} OUT=${OUT:-/tmp/homework}
PREC=${PRECISION:+-p $PRECISION}
mkdir -p "$OUT"

printf "%s, %s emulated rank(s), B=%s, T=%s; rank 0, MiB of device memory (live)\n" "$MODEL" "$RANKS" "$B" "$T"
printf "%-22s %12s %12s %12s %12s %10s %14s\n" "configuration" "after fwd" "after bwd" "after step" "peak" "host" "20 iterations"
while IFS='|' read -r name flags; do
    dir="$OUT/$(echo "$name" | tr ' +' '__')"
    rm -rf "$dir"
    # shellcheck disable=SC2086
    if ! "$TRAINER" -e "$MODEL" -b "$B" -t "$T" --ranks "$RANKS" -x "$STEPS" -v 0 -s 0 $PREC $flags \
        --mem_report 1 -o "$dir" "$@" >"$dir.log" 2>&1; then
        printf "%-22s failed: %s\n" "$name" "$(grep -m 1 error "$dir.log")"
        continue
    fi
    # the last step's rows of rank 0
    awk -F, -v name="$name" -v t20="$(grep -m 1 '20 steps take' "$dir.log" | sed -E 's/.*20 steps take ([0-9.]+) s.*/\1 s/')" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { last = $col["step"] }
        $col["arena"] == "device" { dev[$col["step"], $col["phase"]] = $col["live_total"]; peak[$col["step"]] = $col["peak"] }
        $col["arena"] == "host" && $col["phase"] == "step" { host[$col["step"]] = $col["live_total"] }
        END {
            m = 1048576
            printf "%-22s %12.1f %12.1f %12.1f %12.1f %10.1f %14s\n", name, dev[last, "forward"] / m,
                   dev[last, "backward"] / m, dev[last, "step"] / m, peak[last] / m, host[last] / m, t20
        }' "$dir/mem_report_rank0.csv"
done <<'EOF'
stage 1|-z 1
stage 2|-z 2
stage 2 + offload|-z 2 --offload_optimizer cpu
stage 3|-z 3
stage 3 + offload|-z 3 --offload_optimizer cpu --offload_param cpu
stage 3 + fp16|-z 3 -p fp16
EOF

#!/usr/bin/env bash
# One call of a GPU session, as `dev/bench_gpu.sh plan` lays them out: the
# sections under one time limit (a device call may run 10 minutes), then `pack`
# so that the logs come back as one archive, and the summary printed last.
#
#   bash dev/gpu_session.sh 1|2|3|4|5      (on the GPU machine, OUT set by the device tool)
#
# The preflight (build and a 3-step run) starts every call that finds no build
# from an earlier call on the same machine (a cold one).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu}
export OUT
mkdir -p "$OUT"
LIMIT=${LIMIT:-560}  # seconds for the sections; pack and the summary follow
case "${1:-}" in
1) sections=(offload tests) ;;
2) sections=(peers) ;;
3) sections=(largest homework) ;;
4) sections=(memory sanitize); export SANITIZE_TOOLS=${SANITIZE_TOOLS:-racecheck} ;;
5) sections=(pipeline throughput) ;;
*) echo "usage: $0 1|2|3|4|5 (dev/bench_gpu.sh plan says what each runs)" >&2; exit 2 ;;
esac
start=$(date +%s)
export DEADLINE=$((start + LIMIT))  # a section that can stop part-way (throughput) ends itself before it
timeout -k 10 "$LIMIT" bash -c '
    if [ ! -x train_gpt2_zero ]; then
        bash dev/gpu_preflight.sh >/dev/null 2>&1; tail -n 1 "$OUT/preflight.log"
    fi
    shift
    bash dev/bench_gpu.sh "$@" >"$OUT/sections.log" 2>&1' _ "$1" "${sections[@]}"
rc=$?
echo "call $1 (${sections[*]}): exit $rc after $(($(date +%s) - start)) s$([ $rc = 124 ] && echo ': stopped by the time limit')"
bash dev/bench_gpu.sh pack
echo
cat "$OUT/summary.txt"

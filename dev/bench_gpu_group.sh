#!/usr/bin/env bash
# One group of GPU sections, as `dev/bench_gpu.sh plan` lists them: the
# sections under one time limit, then `pack` (the logs into one archive under
# $OUT), and the summary printed last.
#
#   bash dev/bench_gpu_group.sh 1|2|3|4|5|6|7|8|9   [LIMIT=560] [OUT=out/gpu]
#
# Where nothing is built yet, the preflight (build and a 3-step run) runs first,
# inside the time limit.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu}
export OUT
LIMIT=${LIMIT:-560}  # seconds for the sections; pack and the summary follow
case "${1:-}" in
1) sections=(offload tests) ;;
2) sections=(peers) ;;
3) sections=(largest) ;;
4) sections=(memory sanitize); export SANITIZE_TOOLS=${SANITIZE_TOOLS:-racecheck} ;;
5) sections=(pipeline throughput) ;;
6) sections=(interop kernels) ;;
7) sections=(homework scale llmc) ;;
8) sections=(nvme) ;;
9) sections=(speed) ;;
*) echo "usage: $0 1|2|3|4|5|6|7|8|9 (dev/bench_gpu.sh plan says what each runs)" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
start=$(date +%s)
export DEADLINE=$((start + LIMIT))  # a section that can stop part-way (throughput) ends itself before it
timeout -k 10 "$LIMIT" bash -c '
    if [ ! -x train_gpt2_zero ]; then
        bash dev/gpu_preflight.sh >/dev/null 2>&1; tail -n 1 "$OUT/preflight.log"
    fi
    shift
    bash dev/bench_gpu.sh "$@" >"$OUT/sections.log" 2>&1' _ "$1" "${sections[@]}"
rc=$?
echo "group $1 (${sections[*]}): exit $rc after $(($(date +%s) - start)) s$([ $rc = 124 ] && echo ': stopped by the time limit')"
bash dev/bench_gpu.sh pack
echo
cat "$OUT/summary.txt"

#!/usr/bin/env bash
# The prepared speed variants (zero/base/variants.h: ZERO_VARIANTS=name,...), each
# off by default, and cuDNN's fused attention (--attention cudnn, built where the
# Makefile finds cuDNN), measured on one H100 or H200 in one call of under 9 minutes:
# built, their kernels checked against the CPU twins, their bits checked, then
# timed against the default at GPT-2 124M (d12), T 1024, bf16, B 64 and B 16,
# 12 steps a run; optionally a per-kernel-family table (ncu) and the peers.
# Every run has a timeout, a part that fails leaves a row and the next part
# runs, parts that no longer fit before the deadline are skipped, and the table
# is printed last whatever happened. Logs under $OUT (default out/gpu/speed).
#
#   bash dev/bench_speed.sh                   build check time kernels (~8.2 min on an H100, estimated)
#   bash dev/bench_speed.sh PART...           these parts, in this order
#   PEERS=1 bash dev/bench_speed.sh           also the peers at the end (+~3.5: llm.c's cuDNN build
#                                             ~1.5, its runs ~0.5, torch.compile ~0.8 a batch size);
#                                             with everything else that passes 9 minutes: leave out
#                                             kernels, or run `peers` alone in a second call
#   LIMIT=520 (seconds from the start: the deadline), RUN_TIMEOUT=120 (one trainer run),
#   TRAINER=./train_gpt2_zero (another binary, or a stand-in printing its lines: the script's
#   own logic tried without a GPU)
#
# Parts (minutes on an H100, estimated from the sections of dev/gpu_notes.md):
#   build    ~1.2  the trainers and the workbench programs of the changed families, 16 jobs
#   check    ~1.4  ./dev/cuda/<family> check for adamw, adamw_exact, reduce, encoder,
#                  vocab_parallel, classifier, matmul, layernorm and attention: each checks the
#                  default and its variant (attention: cuDNN's, and its determinism) against the
#                  CPU twin (two programs at a time)
#   time     ~4.3  d12, T 1024, bf16, -z 1, B 64 then B 16: the default, each variant alone, all
#                  of them, all at -z 3 (and -z 2 at B 64), --attention cudnn alone and with all six,
#                  the default again at B 64 (drift), all and cuDNN's again at B 16;
#                  the bits: fused_optimizer and residual_ln must print the default's losses and
#                  norms, device_loss its norms (its losses may move in the last digit), two runs
#                  of the default and two of all the variants must be equal
#   kernels  ~1.3  one d12 B 64 step under ncu (--clock-control none), each kernel family's time
#                  per step, ours (default; all variants and cuDNN's attention) beside llm.c's where the peers' cuDNN
#                  build exists (dev/kernel_table.py)
#   peers    ~3.5  llm.c with cuDNN and torch.compile exactly as `dev/bench_gpu.sh peers` runs them
#   table          printed last, always
#
# What each variant is expected to save, and why (nothing here has run on a GPU
# yet; dev/gpu_notes.md "Not yet measured" keeps the list). "model": the
# step-time model on zero/perf/profiles/h100_measured.json (`--predict`), which
# times a one-launch kernel as the kernel it replaces over the same bytes:
#   fused_optimizer      296 sum-of-squares launches and 148 AdamW launches, each issued by the host,
#                        become 2 + 1 over tables of pieces; model: -1.1 ms a step (B 16 +3.4%, B 64 +0.9%)
#   residual_ln          each block's residual3 is written once and not read again by the next ln1 or
#                        lnf: 12 launches and B*T*C*2 bytes a layer (100 MB at B 64); model: -0.2 ms at
#                        B 16 (+0.5%), -0.7 ms at B 64 (+0.6%)
#   device_loss          a 256 KB read-back and a 65536-term host loop become 8 bytes: tens of us, which
#                        the model (a transfer's bytes) does not see
#   encoder_split        the encoder backward's tail: one warp summed a frequent token's ~2-3k rows one
#                        after another; in 256-row pieces the warps share them (not in the model: same kind)
#   fast_exp_classifier  __expf is a few instructions where expf is ~20, over 2 B*T*V exponentials; worth
#                        it if the classifier is bound by them rather than its ~13 GB a step at B 64
#   dbias_blocks         192 blocks for a 768-wide bias leave 132 SMs under two blocks each; 576 fill them
#   all                  model: B 16 +4.0%, B 64 +1.5% (the model has no line for the last three)
#   --attention cudnn    on one H200 our attention's fwd+bwd at B 8 took 306.6 us against 280.0 us
#                        for PyTorch's SDPA on cuDNN (dev/gpu_notes.md, kernels): if ours runs as fast
#                        as that, 12 layers x 8 x 26.6 us = -2.6 ms of a ~127 ms B 64 step (+2%)
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
LIMIT=${LIMIT:-520}
DEADLINE=${DEADLINE:-$((START + LIMIT))}
OUT=${OUT:-$PWD/out/gpu/speed}
export OUT
mkdir -p "$OUT/runs"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
TABLE=$OUT/table.txt
: >"$TABLE"
# the peers' functions (and row, train's helpers): dev/bench_gpu.sh, sourced without running anything
BENCH_GPU_FUNCTIONS_ONLY=1 . dev/bench_gpu.sh
# cuDNN's library folder on the loader's path (cuDNN opens its engine libraries by name), for
# --attention cudnn and the attention workbench
if found=$(sh dev/find_cudnn.sh "${CUDA_HOME:-/usr/local/cuda}" 2>/dev/null); then
    export LD_LIBRARY_PATH="$(echo "$found" | awk '{print $2}')${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

ALL=fused_optimizer,residual_ln,device_loss,encoder_split,fast_exp_classifier,dbias_blocks
SINGLES="fused_optimizer residual_ln device_loss encoder_split fast_exp_classifier dbias_blocks"
left() { echo $((DEADLINE - $(date +%s))); }
# fits SECONDS WHAT: whether SECONDS more fit before the deadline (20 s kept for the table); a row if not
fits() {
    [ "$(left)" -gt $(($1 + 20)) ] && return 0
    row "$2" "skipped: $(left) s left before the deadline"
    return 1
}

# one d12 run: NAME VARIANTS FLAGS...; its log in $OUT/runs/NAME.log
d12() {
    local name=$1 variants=$2
    shift 2
    ZERO_VARIANTS=$variants timeout "${RUN_TIMEOUT:-120}" "${TRAINER:-./train_gpt2_zero}" -e d12 -t 1024 -p bf16 -x "${STEPS:-12}" \
        -v 0 -s 0 -n -1 -i data/mobydick/mobydick_train.bin "$@" >"$OUT/runs/$name.log" 2>&1
    local rc=$?
    echo $rc >"$OUT/runs/$name.rc"
    row "d12 $name" "$([ $rc = 0 ] && echo "$(tokps_of "$name") tok/s" || echo "FAILED ($rc)")"
}
tokps_of() { sed -nE 's/^average step time .*\(([0-9]+) tok\/s\).*/\1/p' "$OUT/runs/$1.log" 2>/dev/null | head -n 1; }
# the median MFU over the steps after the first
mfu_of() {
    grep -E '^step +[0-9]+/' "$OUT/runs/$1.log" 2>/dev/null | tail -n +2 | sed -nE 's/.*MFU +([0-9.]+)%.*/\1/p' |
        sort -g | awk '{ v[++n] = $1 } END { if (n) printf "%.1f", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'
}
# each step's "loss L | norm N", or only the norms (norms), or only the losses (losses)
steps_of() {
    grep -E '^step +[0-9]+/' "$OUT/runs/$1.log" 2>/dev/null | sed -E 's/.*\| (loss [0-9.]+ \| norm [0-9.]+) .*/\1/' |
        case "${2:-both}" in norms) sed 's/.*| //' ;; losses) sed 's/ |.*//' ;; *) cat ;; esac
}
# same NAME1 NAME2 [norms|losses]: the two runs printed the same steps (and ran them all)
same() {
    local a b
    a=$(steps_of "$1" "${3:-both}") b=$(steps_of "$2" "${3:-both}")
    [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = "${STEPS:-12}" ] && [ "$a" = "$b" ]
}
max_loss_gap() {
    paste <(steps_of "$1" losses | awk '{print $2}') <(steps_of "$2" losses | awk '{print $2}') |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.2g", m }'
}
# a table line: RUN LABEL BASELINE_RUN BITS [VARIANTS the run must have had on]
table_line() {
    local t b
    t=$(tokps_of "$1") b=$(tokps_of "$3")
    if [ -z "$t" ]; then
        printf "  %-36s %s\n" "$2" "FAILED (exit $(cat "$OUT/runs/$1.rc" 2>/dev/null || echo '?')): $(grep -m 1 'error' "$OUT/runs/$1.log" 2>/dev/null | cut -c 1-80)" >>"$TABLE"
        return
    fi
    # a variant's run says it had them on (a stale binary from a failed build would not)
    local said=$(sed -nE 's/^variants on \(ZERO_VARIANTS\): (.*)/\1/p' "$OUT/runs/$1.log" | head -n 1)
    local want=${5:-}
    [ "$said" = "$want" ] || set -- "$1" "$2" "$3" "VARIANTS NOT ON (log says '${said}', wanted '$want'); $4"
    # and a --attention cudnn run says so in its header (a build without cuDNN refuses the flag)
    local cudnn_said=$(grep -c "^attention: cuDNN" "$OUT/runs/$1.log")
    [ "$cudnn_said" = "$([[ $1 == *cudnn* ]] && echo 1 || echo 0)" ] || set -- "$1" "$2" "$3" "ATTENTION NOT AS NAMED; $4"
    printf "  %-36s %8s tok/s  %6s  MFU %5s%%  %s\n" "$2" "$t" "$(ratio "$t" "${b:-0}")" "$(mfu_of "$1")" "$4" >>"$TABLE"
}

part_build() {
    section "build: the trainers and the workbench, $(nproc) jobs"
    local t0=$(date +%s) rc1 rc2
    make -j"$(nproc)" train_gpt2_zero >"$OUT/build.log" 2>&1 &
    local p1=$!
    make -C dev/cuda -j"$(nproc)" adamw adamw_exact reduce encoder vocab_parallel classifier matmul layernorm attention \
        >"$OUT/workbench_build.log" 2>&1 &
    local p2=$!
    wait $p1; rc1=$?
    wait $p2; rc2=$?
    [ $rc1 = 0 ] || tail -n 20 "$OUT/build.log"
    [ $rc2 = 0 ] || tail -n 20 "$OUT/workbench_build.log"
    row "build (trainer / workbench)" "$([ $rc1 = 0 ] && echo ok || echo FAILED) / $([ $rc2 = 0 ] && echo ok || echo FAILED), $(($(date +%s) - t0)) s"
}

part_check() {
    section "check: the changed families' workbench, default and variant against the CPU twins"
    local t0=$(date +%s)
    : >"$OUT/checks.txt"
    check_one() {  # PROG: its check mode, under a timeout
        [ -x "dev/cuda/$1" ] || { echo "not built" >"$OUT/runs/check_$1.log"; echo 127 >"$OUT/runs/check_$1.rc"; return; }
        (cd dev/cuda && timeout "${CHECK_TIMEOUT:-170}" "./$1" check $([ $1 = attention ] && echo --check-determinism) \
            >"$OUT/runs/check_$1.log" 2>&1
            echo $? >"$OUT/runs/check_$1.rc")
    }
    # two lanes: one program's CPU twin runs while the other's kernels do
    (for p in adamw reduce classifier layernorm attention; do check_one $p; done) &
    local lane=$!
    for p in encoder matmul vocab_parallel adamw_exact; do check_one $p; done
    wait $lane
    for p in adamw adamw_exact reduce encoder vocab_parallel classifier matmul layernorm attention; do
        local rc=$(cat "$OUT/runs/check_$p.rc" 2>/dev/null || echo '?')
        local n=$(grep -cE '^  .*PASS$|^  .*FAIL$' "$OUT/runs/check_$p.log" 2>/dev/null)
        local bad=$(grep -E 'FAIL$' "$OUT/runs/check_$p.log" 2>/dev/null | head -n 3 | sed -E 's/ +/ /g' | cut -c 1-110)
        row "workbench $p check" "$([ "$rc" = 0 ] && echo "passed ($n checks)" || echo "FAILED (exit $rc) ${bad:-$(tail -n 1 "$OUT/runs/check_$p.log" 2>/dev/null)}")"
        echo "  $p: $([ "$rc" = 0 ] && echo "passed, $n checks" || echo "FAILED (exit $rc)")" >>"$OUT/checks.txt"
    done
    row "check part" "$(($(date +%s) - t0)) s"
}

part_time() {
    section "time: d12, T 1024, bf16, 12 steps: the default, each variant, all; B 64 then B 16"
    rm -f "$OUT"/runs/b*.log "$OUT"/runs/b*.rc  # (`table` alone prints the last results again)
    [ -x "${TRAINER:-./train_gpt2_zero}" ] || { row "time" "not run: no ${TRAINER:-./train_gpt2_zero}"; return; }
    local B v
    for B in 64 16; do
        local per=$([ $B = 64 ] && echo 12 || echo 8)  # seconds a run, about (start-up 6-7, 12 steps)
        fits $((per * 2)) "B $B: the default" || continue
        d12 "b${B}_default" "" -b $B -z 1
        for v in $SINGLES; do fits $per "B $B: $v" && d12 "b${B}_$v" "$v" -b $B -z 1; done
        fits $per "B $B: all" && d12 "b${B}_all" "$ALL" -b $B -z 1
        for z in $([ $B = 64 ] && echo 2) 3; do fits $per "B $B: all, -z $z" && d12 "b${B}_all_z$z" "$ALL" -b $B -z $z; done
        fits $per "B $B: --attention cudnn" && d12 "b${B}_cudnn" "" -b $B -z 1 --attention cudnn
        fits $per "B $B: all, --attention cudnn" && d12 "b${B}_all_cudnn" "$ALL" -b $B -z 1 --attention cudnn
        [ $B = 64 ] && fits $per "B 64: the default again" && d12 "b64_default_again" "" -b 64 -z 1
        [ $B = 16 ] && fits $per "B 16: all again" && d12 "b16_all_again" "$ALL" -b 16 -z 1
        [ $B = 16 ] && fits $per "B 16: --attention cudnn again" && d12 "b16_cudnn_again" "" -b 16 -z 1 --attention cudnn
    done
}

# the bits and the tok/s of part time, as table rows
time_table() {
    local B v bits
    for B in 64 16; do
        [ -f "$OUT/runs/b${B}_default.log" ] || continue
        echo "d12 B $B, T 1024, bf16 ($(($B * 1024)) tokens a step), 12 steps; ratio to the default at -z 1" >>"$TABLE"
        table_line "b${B}_default" "default (-z 1)" "b${B}_default" "the reference"
        for v in $SINGLES; do
            [ -f "$OUT/runs/b${B}_$v.log" ] || continue
            case $v in
            fused_optimizer | residual_ln)
                if same "b${B}_default" "b${B}_$v"; then bits="losses, norms = the default's"
                else bits="BITS DIFFER from the default (must not)"; fi ;;
            device_loss)
                if same "b${B}_default" "b${B}_$v" norms; then bits="norms = the default's, losses within $(max_loss_gap "b${B}_default" "b${B}_$v")"
                else bits="NORMS DIFFER from the default (must not)"; fi ;;
            *) bits="other sums: losses within $(max_loss_gap "b${B}_default" "b${B}_$v") of the default" ;;
            esac
            table_line "b${B}_$v" "$v" "b${B}_default" "$bits" "$v"
        done
        table_line "b${B}_all" "all six" "b${B}_default" "" "$ALL"
        for z in 2 3; do
            [ -f "$OUT/runs/b${B}_all_z$z.log" ] || continue
            local t1=$(tokps_of "b${B}_all") tz=$(tokps_of "b${B}_all_z$z")
            table_line "b${B}_all_z$z" "all six, -z $z" "b${B}_default" \
                "-z $z / -z 1 with all: $(ratio "${tz:-0}" "${t1:-0}") (target >= 0.97)" "$ALL"
        done
        if [ -f "$OUT/runs/b${B}_cudnn.log" ]; then
            table_line "b${B}_cudnn" "--attention cudnn" "b${B}_default" \
                "other sums: losses within $(max_loss_gap "b${B}_default" "b${B}_cudnn") of the default"
            local ta=$(tokps_of "b${B}_all") tac=$(tokps_of "b${B}_all_cudnn")
            table_line "b${B}_all_cudnn" "all six, --attention cudnn" "b${B}_default" \
                "/ all six with ours: $(ratio "${tac:-0}" "${ta:-0}")" "$ALL"
        fi
        if [ -f "$OUT/runs/b${B}_cudnn_again.log" ]; then
            same "b${B}_cudnn" "b${B}_cudnn_again" && bits="bit-identical to the first" || bits="NOT bit-identical to the first"
            table_line "b${B}_cudnn_again" "--attention cudnn again" "b${B}_default" "$bits"
        fi
        if [ -f "$OUT/runs/b${B}_default_again.log" ]; then
            same "b${B}_default" "b${B}_default_again" && bits="bit-identical to the first" || bits="NOT bit-identical to the first"
            table_line "b${B}_default_again" "default again (drift)" "b${B}_default" "$bits"
        fi
        if [ -f "$OUT/runs/b${B}_all_again.log" ]; then
            same "b${B}_all" "b${B}_all_again" && bits="bit-identical to the first" || bits="NOT bit-identical to the first"
            table_line "b${B}_all_again" "all six again" "b${B}_default" "$bits" "$ALL"
        fi
        echo >>"$TABLE"
    done
}

part_kernels() {
    section "kernels: one d12 B 64 step under ncu, time per kernel family"
    rm -f "$OUT/kernel_table.txt"
    command -v ncu >/dev/null || { row "kernels" "not run: no ncu"; return; }
    [ -x ./train_gpt2_zero ] || { row "kernels" "not run: no ./train_gpt2_zero"; return; }
    # three steps; dev/kernel_table.py keeps the launches from the second encoder backward to the third (the
    # second step's optimizer, then the third step up to its encoder backward: one whole step)
    local csvs=() names=() v
    for v in default all_cudnn; do
        fits 40 "kernels ($v)" || continue
        ZERO_VARIANTS=$([ $v = all_cudnn ] && echo $ALL) timeout 150 ncu --clock-control none --cache-control none \
            --metrics gpu__time_duration.sum --csv --print-units base --log-file "$OUT/ncu_ours_$v.csv" \
            ./train_gpt2_zero -e d12 -b 64 -t 1024 -p bf16 -x 3 -v 0 -s 0 -n -1 -i data/mobydick/mobydick_train.bin \
            $([ $v = all_cudnn ] && echo --attention cudnn) >"$OUT/ncu_ours_$v.log" 2>&1
        csvs+=("$OUT/ncu_ours_$v.csv") names+=("ours, $v")
    done
    local llmc_cudnn=.carry/llm.c/train_gpt2cu_cudnn
    if [ -x "$llmc_cudnn" ] && fits 50 "kernels (llm.c)"; then
        local found cudnn_lib
        found=$(sh dev/find_cudnn.sh "${CUDA_HOME:-/usr/local/cuda}" 2>/dev/null) && cudnn_lib=$(echo "$found" | awk '{print $2}')
        # (-m 1: one batch of the validation llm.c runs at step 0, whose launches ncu would time too)
        timeout 180 env LD_LIBRARY_PATH="${cudnn_lib:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ncu --clock-control none \
            --cache-control none --metrics gpu__time_duration.sum --csv --print-units base --log-file "$OUT/ncu_llmc.csv" \
            "$llmc_cudnn" -e d12 -b 64 -t 1024 -x 3 -v 100 -m 1 -s 100 -h 0 -i data/mobydick/mobydick_train.bin \
            -j data/mobydick/mobydick_train.bin -o "$OUT/runs/llmc_ncu" >"$OUT/ncu_llmc.log" 2>&1
        csvs+=("$OUT/ncu_llmc.csv") names+=("llm.c (cuDNN)")
    fi
    [ ${#csvs[@]} -gt 0 ] || return
    # (ncu's CSV is in its --log-file; should a version print it with the program's output, the
    # script reads that too: it keeps only the quoted lines after the header)
    local args=() i
    for i in "${!csvs[@]}"; do
        cat "${csvs[$i]}" "${csvs[$i]%.csv}.log" >"${csvs[$i]%.csv}.all" 2>/dev/null
        args+=("${names[$i]}=${csvs[$i]%.csv}.all")
    done
    python3 dev/kernel_table.py "${args[@]}" >"$OUT/kernel_table.txt" 2>&1 || echo "(kernel_table.py failed)" >>"$OUT/kernel_table.txt"
    cat "$OUT/kernel_table.txt"
}

part_peers() {
    section "peers: llm.c with cuDNN and torch.compile, as dev/bench_gpu.sh peers runs them"
    fits 200 "peers" || return
    peer_llmc_build
    local B
    for B in 64 16; do
        fits 60 "peers B $B" || continue
        peer_llmc $B
        peer_torch $B
        eval "PEER_LLMC_B$B=${llmc:-}" "PEER_TORCH_B$B=${torch:-}"
    done
}

peers_table() {
    local B l t ours all
    for B in 64 16; do
        l=$(eval echo "\${PEER_LLMC_B$B:-}") t=$(eval echo "\${PEER_TORCH_B$B:-}")
        [ -n "$l$t" ] || continue
        ours=$(tokps_of "b${B}_default") all=$(tokps_of "b${B}_all") cud=$(tokps_of "b${B}_all_cudnn")
        echo "d12 B $B against the peers (target >= 1.05 of both): llm.c (cuDNN) ${l:-?} tok/s, torch.compile ${t:-?} tok/s" >>"$TABLE"
        echo "  default: $(ratio "${ours:-0}" "${l:-0}") of llm.c, $(ratio "${ours:-0}" "${t:-0}") of torch.compile;" \
            "all six: $(ratio "${all:-0}" "${l:-0}") of llm.c, $(ratio "${all:-0}" "${t:-0}") of torch.compile;" \
            "all six + cuDNN's attention: $(ratio "${cud:-0}" "${l:-0}") of llm.c, $(ratio "${cud:-0}" "${t:-0}") of torch.compile" >>"$TABLE"
    done
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(build check time kernels)
[ "${PEERS:-0}" = 1 ] && [ $# = 0 ] && parts+=(peers)
for p in "${parts[@]}"; do
    case $p in
    build) fits 60 "build" && part_build ;;
    check) fits 60 "check" && part_check ;;
    time) part_time ;;
    kernels) part_kernels ;;
    peers) part_peers ;;
    table) ;;
    *) echo "unknown part '$p' (build check time kernels peers table)" >&2 ;;
    esac
done

# ---- the table, last
{
    echo
    echo "##### speed variants ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $(($(date +%s) - START)) s)"
    [ -f "$OUT/checks.txt" ] && { echo "workbench checks (default and variant against the CPU twins):"; cat "$OUT/checks.txt"; echo; }
} >"$OUT/table_head.txt"
time_table
peers_table
[ -s "$OUT/kernel_table.txt" ] && { echo "per kernel family, ms per d12 B 64 step (ncu):"; cat "$OUT/kernel_table.txt"; } >>"$TABLE"
echo "rows: $SUMMARY; logs: $OUT/runs" >>"$TABLE"
cat "$OUT/table_head.txt" "$TABLE"

#!/bin/sh
# The layer rule, checked (CTest: layers). Every file of ours sits in one layer;
# a file may include its own layer and the layers listed under it, nothing above:
#
#   reproduce zero/reproduce/ the paper's tables and figures and the homework, drawn from trainer runs
#   run      zero/run/      flags, options, DeepSpeed config, set-up, fit check, reports
#   perf     zero/perf/     the step-time model: the step's operations, their times, calibration
#   pipeline zero/pipeline/ pipeline schedules, a stage's slots between its neighbours, the bubble measured
#   model    zero/model/    GPT-2 as call lists over the engine's hooks
#   engine   zero/engine/   the ZeRO engine, slots, host tasks, predictor, loss scaler, checkpoints
#   comm     zero/comm/     the Comm interface, emulated ranks, NCCL, rendezvous, launcher
#   layout   zero/layout/   the model's shape, the flat buffer's units and shards, activations, model files
#   kernels  kernels/       CUDA kernel families and their CPU twins      data  data/   tokenizer, loader
#   base     zero/base/     errors, dtypes, RNG, JSON, the device runtime, the memory accountant
#
# and no two files include each other, directly or through others (tsort finds
# cycles). The top (train_gpt2_zero.cu), dev/ and test/ may include anything.
#
#   sh dev/check_layers.sh [REPO_ROOT]      exit 0: the rule holds; 1: each breach on a line
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2

layer_of() {
    case $1 in
    zero/base/*) echo base ;;
    kernels/*) echo kernels ;;
    data/*) echo data ;;
    zero/layout/*) echo layout ;;
    zero/comm/*) echo comm ;;
    zero/engine/*) echo engine ;;
    zero/model/*) echo model ;;
    zero/pipeline/*) echo pipeline ;;
    zero/perf/*) echo perf ;;
    zero/run/*) echo run ;;
    zero/reproduce/*) echo reproduce ;;
    zero/*) echo unplaced ;;
    *) echo top ;;
    esac
}
# the layers each layer may include (its own included)
allowed() {
    case $1 in
    base) echo "base" ;;
    kernels) echo "base kernels" ;;
    data) echo "base data" ;;
    layout) echo "base layout" ;;
    comm) echo "base kernels comm" ;;
    engine) echo "base kernels data layout comm engine" ;;
    model) echo "base kernels data layout comm engine model" ;;
    pipeline) echo "base kernels data layout comm engine model pipeline" ;;
    perf) echo "base kernels data layout comm engine model pipeline perf" ;;
    run) echo "base kernels data layout comm engine model pipeline perf run" ;;
    reproduce) echo "base kernels data layout comm engine model pipeline perf run reproduce" ;;
    *) echo "base kernels data layout comm engine model pipeline perf run reproduce top" ;;
    esac
}

bad=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for f in $(git ls-files 'zero/*' 'kernels/*' 'data/*' 'dev/*' 'test/*' train_gpt2_zero.cu | grep -E '\.(h|cuh|cu|cpp|inc)$'); do
    from=$(layer_of "$f")
    if [ "$from" = unplaced ]; then
        echo "$f: in zero/ but in no layer's folder"
        bad=1
    fi
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        [ -f "$inc" ] || continue  # relative includes of dev/ and test/ helpers, and system headers
        echo "$f $inc" >>"$edges"
        to=$(layer_of "$inc")
        case " $(allowed "$from") " in
        *" $to "*) ;;
        *)
            echo "$f ($from) includes $inc ($to): a lower layer may not include a higher one"
            bad=1
            ;;
        esac
    done
done
# cycles: tsort reports the files of each loop
cycles=$(tsort "$edges" 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: */  /')
if [ -n "$cycles" ]; then
    echo "include cycle through:"
    echo "$cycles"
    bad=1
fi
[ $bad = 0 ] && echo "layers: the include rule holds ($(wc -l <"$edges") includes, no cycle)"
exit $bad

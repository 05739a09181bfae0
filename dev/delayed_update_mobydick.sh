#!/bin/sh
# The delayed parameter update against the undelayed run on Moby-Dick: make
# train's small GPT-2 (its CPU flags) for STEPS steps, optimizer offload at
# stage 2, once without and once with --offload_delay_steps W; prints both
# final validation losses and fails unless the delayed one is within 2% of
# the other. About 5 minutes on a 2-core machine (two runs of ~2.5), so not in
# make test, whose delayed_update test checks the rule itself bit for bit.
# LR (default make train's 2e-3) sets the peak learning rate.
#
#   [LR=6e-4] sh dev/delayed_update_mobydick.sh [STEPS=300] [W=5] [OUT=out/delayed_update]
set -e
cd "$(dirname "$0")/.."
STEPS=${1:-300}
W=${2:-5}
OUT=${3:-out/delayed_update}
make -s train_gpt2_zero_cpu data
LR=${LR:-2e-3}
FLAGS="-e L=4,H=4,C=128,V=50257,T=64 -b 16 -t 64 -l $LR -u 20 -q 0.1 -c 0.1 -m 32 -s 0 -n -1 --overwrite 1
       -x $STEPS -v $STEPS -z 2 --offload_optimizer cpu"
val_loss() { grep "tel:" "$1/main.log" | tail -1 | sed 's/.*tel://'; }
./train_gpt2_zero_cpu $FLAGS -o "$OUT/undelayed" > "$OUT.undelayed.txt" 2>&1 || { tail "$OUT.undelayed.txt"; exit 1; }
./train_gpt2_zero_cpu $FLAGS --offload_delay_steps "$W" -o "$OUT/delayed" > "$OUT.delayed.txt" 2>&1 ||
    { tail "$OUT.delayed.txt"; exit 1; }
a=$(val_loss "$OUT/undelayed")
b=$(val_loss "$OUT/delayed")
echo "validation loss after $STEPS steps: undelayed $a, --offload_delay_steps $W $b"
awk -v a="$a" -v b="$b" 'BEGIN { d = (b - a) / a; printf "relative difference %+.3f%%\n", 100 * d;
                                 exit (d < -0.02 || d > 0.02) }'

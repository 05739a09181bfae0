#!/bin/sh
# --trace in Chromium's own DevTools (dev/trace_devtools.js), where Chromium and
# playwright-core are installed (else skipped: not part of what CI needs): a
# predicted step of four pipeline stages and a real one of 2 x 2 x 2 ranks
# loaded as a user loads them; every slice of the file shown and kept, every
# receive's arrow drawn from its send, the ranks in order.
#
# usage: test_trace_browser.sh <train_gpt2_zero_cpu>
set -eu
trainer=$(realpath "$1")
root=$(dirname "$trainer")
export NODE_PATH="$(npm root -g 2>/dev/null || true)${NODE_PATH:+:$NODE_PATH}"
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ] || ! node -e "require('playwright-core')" 2>/dev/null; then
    echo "skipped: needs chromium and playwright-core (apt-get install chromium; npm install -g playwright-core)"
    exit 77
fi
python3 -c "import struct,random; r=random.Random(5); h=[20240520,1,20000]+[0]*253; open('train.bin','wb').write(struct.pack('<256i',*h)+struct.pack('<20000H',*[r.randrange(512) for _ in range(20000)]))"
"$trainer" -e L=8,H=4,C=64,V=512,T=32 -t 32 -b 2 -d 2048 -z 1 --pp 4 \
    --predict "$root/zero/perf/profiles/h100_dgx.json" --nodes 1 --trace predicted.json > predicted.log
"$trainer" -e L=4,H=4,C=64,V=512,T=32 -i train.bin -t 32 -b 2 --ranks 8 -z 3 --tp 2 --pp 2 -d 512 \
    --offload_optimizer cpu -x 3 -v 0 -s 0 -n -1 --trace measured.json > measured.log
for t in predicted measured; do
    node "$root/dev/trace_devtools.js" $t.json > $t.devtools.json
    node -e '
const [file, seen] = process.argv.slice(1).map((f) => JSON.parse(require("fs").readFileSync(f)));
const x = file.traceEvents.filter((e) => e.ph === "X");
const recvs = x.filter((e) => e.args.kind === "recv").length;
const kept = seen.tracks.reduce((n, t) => n + t.kept, 0), shown = seen.tracks.reduce((n, t) => n + t.shown, 0);
const arrows = seen.flows.filter((f) => f.length === 2 && f[0].name === "send" && f[1].name === "recv").length;
const order = seen.order.map((p) => p.pid);
const ok = kept === x.length && shown === x.length && arrows === recvs && seen.flows.length === recvs &&
           order.every((p, i) => i === 0 || order[i - 1] < p);
console.log(`${process.argv[1]}: ${x.length} slices, DevTools keeps ${kept} and shows ${shown}; ${recvs} receives, ` +
            `${arrows} arrows send -> receive of ${seen.flows.length}; ranks shown ${order.join(" ")}: ${ok ? "ok" : "FAIL"}`);
process.exit(ok ? 0 : 1);' $t.json $t.devtools.json
done

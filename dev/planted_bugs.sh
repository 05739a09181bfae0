#!/usr/bin/env bash
# Bugs a GPU would show, planted one at a time in a copy of this tree: each
# must make the tests named beside it fail (they run as in `make test`, in
# checking mode). Prints, per bug, the tests that failed and the first error.
#
#   bash dev/planted_bugs.sh            every bug (about 2 minutes each on 2 cores)
#   bash dev/planted_bugs.sh NAME...    some of them
#   PLANTED_LOGS=DIR bash dev/...       and keep each bug's build and test output as DIR/NAME.log
#
# dev/planted_bugs.md says, bug by bug, which check kills it, by what margin,
# and which configurations that check covers and which it cannot see.
#
# Needs `make data` done here first (the copy borrows the data).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name | file | the line(s) as they are | as planted | tests that must fail
bugs=(
"release_before_backward|zero/model/gpt2.h|            layer_backward(l, p, g);\n            zero.release_params(u);|            zero.release_params(u);\n            layer_backward(l, p, g);|zero_stages"
"landing_reused_early|zero/engine/offload.h|        if (params_up == ParamsUp::ThroughLanding) event_sync(up_read[k]);\n||offload_recompute"
"activation_slot_out_of_order|zero/pipeline/stage_runner.h|return micro % model.acts.slots;|return micro / 2 % model.acts.slots;|pipeline pp_trainer"
"all_reduce_without_wait|zero/engine/zero_engine.h|        stream_wait(comm_stream, compute_done);\n        reduce_unit(u, micro_step);|        if (sharded.states) stream_wait(comm_stream, compute_done);\n        reduce_unit(u, micro_step);|zero_stages perf_trace"
"disk_read_overtakes_write|zero/engine/disk_states.h|        if (s.write_op >= 0) op.after = {s.write_op};\n||disk_states"
"dry_run_drops_a_wait|zero/base/backend.h|    if (OpRecorder* r = tl_recorder) r->wait(stream_lane(s), r->event_op(e));\n    if (checked(e)|    if (OpRecorder* r = tl_recorder; r \&\& r->capture) r->wait(stream_lane(s), r->event_op(e));\n    if (checked(e)|perf_trace dry_run_scale"
"dry_run_skips_a_copy_down|zero/engine/offload.h|    void to_host(T* dst, const T* src, size_t n, int u) {\n        at_unit(u);\n        device_copy(|    void to_host(T* dst, const T* src, size_t n, int u) {\n        at_unit(u);\n        if (!dry_recorder()) device_copy(|perf_trace"
"clip_by_own_shard|zero/engine/zero_engine.h|        double total = comm.sum_scalar(local);|        double total = (comm.sum_scalar(local), local);|clip_across_ranks"
"short_transfer_taken_whole|zero/engine/disk_states.h|            done += (size_t)got;|            done += left;|disk_states"
"stage_rounding_keys_local|zero/engine/rank_state.h|whole.full_offset[layout.global_unit(u)] - plan.full_offset[u]|whole.full_offset[u] - plan.full_offset[u]|pp_trainer"
"resume_rounds_by_stage_offsets|zero/engine/rank_state.h|rounding_seed(adam_t), key(p) + b);|rounding_seed(adam_t), p.full_offset + b);|pp_checkpoint"
"grid_rank_data_tensor_swapped|zero/engine/zero_engine.h|rank_of(pipe_ ? pipe_->rank : 0, comm_.rank,\n                                                                                tensor_ ? tensor_->rank : 0)),|rank_of(pipe_ ? pipe_->rank : 0, tensor_ ? tensor_->rank : 0,\n                                                                                comm_.rank)),|nvme_offload pipeline"
"fused_output_kept_too_early|zero/model/gpt2.h|            else if (l > 0) keep_output(l - 1);|            else keep_output(l);|variants"
"dry_run_copies_half_their_bytes|zero/base/backend.h|    op.bytes = bytes, op.dims = {(long)bytes};|    op.bytes = r->capture ? bytes : bytes / 2, op.dims = {(long)bytes};|perf_trace"
"trace_printed_apart|zero/perf/trace.h|r.track[i], trace_us(start).c_str(),\n                   trace_dur(start, to[k][i]).c_str(),|r.track[i], strf(\"%.3f\", (r.start[i] - origin) * 1e6).c_str(),\n                   strf(\"%.3f\", (r.end[i] - r.start[i]) * 1e6).c_str(),|trace"
"stream_order_dropped|zero/base/timeline.h|        if (const int b = stream_before[s][i]; b >= 0 \&\& tl.end[s][b] == NONE) return false;\n||trace"
"trace_lane_not_the_models|zero/run/predict_report.h|t.track.push_back((int)s.timeline.lane[k][i]);|t.track.push_back((int)ops[i].lane);|trace"
"delayed_adamw_unlabelled|zero/engine/offload.h|        at_unit(u);  // (the delayed update's loop is one task: its ops are each unit's)\n||trace"
"ranks_not_padded_into_order|zero/perf/trace.h|top == per_track[k].end() ? busiest + 1 : top->second;|busiest + 1;|trace"
)

wanted=("$@")
status=0
printf '%-30s %-28s %s\n' "bug" "failed" "first error"
for b in "${bugs[@]}"; do
    IFS='|' read -r name file old new tests <<<"$b"
    if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
    tree="$work/$name"
    mkdir -p "$tree"
    (cd "$here" && git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$tree")
    for d in data/npm data/mobydick data/gpt2_tokenizer.bin; do ln -s "$here/$d" "$tree/$d"; done
    OLD="$old" NEW="$new" python3 - "$tree/$file" <<'EOF'
import os, sys
path = sys.argv[1]
old = os.environ["OLD"].replace("\\n", "\n").replace("\\&", "&")
new = os.environ["NEW"].replace("\\n", "\n").replace("\\&", "&")
s = open(path).read()
if s.count(old) != 1:
    sys.exit(f"{path}: the line to plant in is not there exactly once (the code moved): update dev/planted_bugs.sh")
open(path, "w").write(s.replace(old, new))
EOF
    log="$work/$name.log"
    (cd "$tree" && make train_gpt2_zero_cpu >"$log" 2>&1 &&
        cmake -S test -B build/test -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 &&
        cmake --build build/test -j 2 --target $tests >>"$log" 2>&1) || { echo "$name: the planted tree does not build"; tail -5 "$log"; exit 1; }
    failed=""
    for t in $tests; do
        if ! (cd "$tree/build/test" && ctest -R "^$t\$" --output-on-failure >>"$log" 2>&1); then failed="$failed $t"; fi
    done
    first=$( (grep -m1 '^error' "$log" || grep -m1 '^FAIL' "$log" || true) | cut -c1-160)
    if [ -n "${PLANTED_LOGS:-}" ]; then mkdir -p "$PLANTED_LOGS" && cp "$log" "$PLANTED_LOGS/"; fi
    if [ -z "$failed" ]; then
        printf '%-30s %-28s %s\n' "$name" "NONE: it survived" ""
        status=1
    else
        printf '%-30s %-28s %s\n' "$name" "${failed# }" "$first"
    fi
    rm -rf "$tree"
done
exit $status

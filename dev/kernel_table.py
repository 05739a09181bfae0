#!/usr/bin/env python3
"""Time per training step by kernel family, from Nsight Compute's CSVs of
whole runs, one column per run: dev/bench_speed.sh's `kernels` part profiles
three d12 B 64 steps of ours (the default and all variants) and of llm.c with

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --csv --print-units base --log-file FILE <trainer> ... -x 3

and calls

    python3 dev/kernel_table.py "ours, default=FILE" "llm.c (cuDNN)=FILE2" ...

One step is the launches after a run's second encoder backward (ours:
encoder_backward_kernel; llm.c: wte_backward_kernel) up to and including its
third: the second step's optimizer, then the third step's forward and
backward. Both programs launch that kernel once a step and their validation
passes have no backward, so the window is one whole training step whatever
happens at start-up. The families are matched on the kernel's name (the
first pattern that matches wins); a name no pattern knows is "other", and the
names in it are listed so that a new kernel gets its family.

Also: python3 dev/kernel_table.py --self-test (run by nothing: a check of the
parsing on made-up CSV text).
"""
import csv
import io
import re
import sys

FAMILIES = [
    ("attention", r"attention|flash|fmha|sdpa|cudnn|softmax|permute"),
    ("matmul (cuBLASLt)", r"nvjet|gemm|cutlass|xmma|^sm\d+_|cublas|splitk|ampere_|hopper"),
    ("layernorm backward", r"layernorm_backward"),
    ("layernorm forward (+ residual)", r"layernorm|fused_residual"),
    ("column sums (ln bwd, dbias)", r"finish_column|dbias|matmul_backward_bias|reduce_add_sum"),
    ("residual add", r"residual"),
    ("gelu", r"gelu"),
    ("classifier", r"classifier|crossentropy|cross_entropy"),
    ("encoder", r"encoder|wte_|wpe_"),
    ("adamw", r"adamw"),
    ("gradient norm", r"sumsq|norm_squared|global_norm"),
    ("copies, casts, sums", r"accumulate|cast|copy|reduce_sum|loss_total|memset|fill"),
]
ANCHOR = re.compile(r"^(encoder_backward_kernel|wte_backward_kernel)$")
UNITS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}


def base_name(name):
    """'void encoder_backward_kernel<__nv_bfloat16, true>(bf16 *, ...)' -> 'encoder_backward_kernel'"""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    name = name.split("(")[0].split("<")[0]
    return name.split("::")[-1].strip()


def family_of(name):
    low = name.lower()
    for fam, pattern in FAMILIES:
        if re.search(pattern, low):
            return fam
    return "other"


def launches(text):
    """[(kernel base name, ms)] in launch order, from ncu's CSV (details or raw page), other lines skipped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"')))))
    out = {}
    for r in rows:
        if "Metric Name" in r:  # the details page: one row per (kernel, metric)
            if r.get("Metric Name") != "gpu__time_duration.sum":
                continue
            value, unit = r.get("Metric Value", ""), r.get("Metric Unit", "nsecond")
        else:  # the raw page: a column per metric, its unit in the second header row
            value, unit = r.get("gpu__time_duration.sum", ""), "nsecond"
        try:
            ms = float(value.replace(",", "")) * UNITS.get(unit.strip(), 1e-6)
        except ValueError:
            continue
        out[int(r["ID"])] = (base_name(r.get("Kernel Name", "?")), ms)
    return [out[k] for k in sorted(out)]


def one_step(ls):
    """The launches after the second anchor up to and including the third, or None."""
    at = [i for i, (n, _) in enumerate(ls) if ANCHOR.match(n)]
    if len(at) < 3:
        return None
    return ls[at[1] + 1 : at[2] + 1]


def table(runs):
    """runs: [(label, [(name, ms)] or None)] -> the table's text"""
    fams = [f for f, _ in FAMILIES] + ["other"]
    per = []
    others = {}
    for label, step in runs:
        t = {f: [0.0, 0] for f in fams}
        for name, ms in step or []:
            f = family_of(name)
            t[f][0] += ms
            t[f][1] += 1
            if f == "other":
                others[name] = others.get(name, 0) + 1
        per.append(t)
    w = max(12, max(len(l) for l, _ in runs))
    out = ["  %-32s" % "family (ms per step, launches)" + "".join("  %*s" % (w + 8, l) for l, _ in runs)]
    if len(runs) > 1:
        out[0] += "  " + "  ".join("%s / %s" % (l.split(",")[0][:14], runs[0][0][:14]) for l, _ in runs[1:])
    for f in fams:
        if not any(t[f][1] for t in per):
            continue
        line = "  %-32s" % f + "".join("  %*s" % (w + 8, "%.3f (%d)" % (t[f][0], t[f][1])) for t in per)
        base = per[0][f][0]
        line += "".join("  %14s" % ("%.2f" % (t[f][0] / base) if base > 0 else "-") for t in per[1:])
        out.append(line)
    tot = [sum(v[0] for v in t.values()) for t in per]
    n = [sum(v[1] for v in t.values()) for t in per]
    line = "  %-32s" % "total" + "".join("  %*s" % (w + 8, "%.3f (%d)" % (a, b)) for a, b in zip(tot, n))
    line += "".join("  %14s" % ("%.2f" % (a / tot[0]) if tot[0] > 0 else "-") for a in tot[1:])
    out.append(line)
    for label, step in runs:
        if step is None:
            out.append("  (%s: fewer than three encoder backward launches: no step found)" % label)
    if others:
        out.append("  other: " + ", ".join("%s x%d" % kv for kv in sorted(others.items())))
    return "\n".join(out)


def self_test():
    head = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = []
    names = ["void encoder_forward_kernel<float, true>(float *)", "nvjet_tst_128x256", "void encoder_backward_kernel<f, true>(int)",
             "void adamw_kernel<float>(float *)", "layernorm_forward_kernel", "attention_forward_kernel",
             "void encoder_backward_kernel<f, true>(int)", "adamw_pieces_kernel", "mystery_kernel",
             "void encoder_backward_kernel<f, true>(int)", "adamw_kernel"]
    for i, n in enumerate(names):
        rows.append('"%d","%s","gpu__time_duration.sum","usecond","%s"' % (i, n, "1,000" if i == 7 else "10"))
    ls = launches("==PROF== noise\n" + head + "\n".join(rows) + "\n")
    assert [n for n, _ in ls][:3] == ["encoder_forward_kernel", "nvjet_tst_128x256", "encoder_backward_kernel"], ls
    step = one_step(ls)
    assert [n for n, _ in step] == ["adamw_pieces_kernel", "mystery_kernel", "encoder_backward_kernel"], step
    assert abs(step[0][1] - 1.0) < 1e-12, step
    text = table([("a", step), ("b", None)])
    assert "adamw" in text and "mystery_kernel x1" in text and "no step found" in text, text
    print("kernel_table self-test: ok")


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    runs = []
    for arg in argv[1:]:
        label, _, path = arg.rpartition("=")
        try:
            with open(path, errors="replace") as f:
                runs.append((label or path, one_step(launches(f.read()))))
        except OSError as e:
            runs.append((label or path, None))
            print("  (%s: %s)" % (label, e))
    if not runs:
        print("usage: kernel_table.py LABEL=NCU_CSV ...", file=sys.stderr)
        return 2
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)

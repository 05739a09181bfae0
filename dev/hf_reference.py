#!/usr/bin/python3
"""An independent check of our Hugging Face export (--export_hf): reads the
folder's config.json and model.safetensors with nothing but struct, json and
torch (not our C++ reader, not the safetensors package), puts the weights into
the PyTorch GPT-2 of dev/gpt2_reference.py (undoing HF's Conv1D transposes),
and writes the logits of one batch of tokens.

usage: hf_reference.py HF_DIR TOKENS OUT
  TOKENS: int32 B, T, then B*T inputs and B*T targets (int32), as gpt2_reference.py reads
  OUT:    float32 B*T*V logits

With ZERO_HF_TRANSFORMERS=1 the logits come instead from transformers'
GPT2LMHeadModel.from_pretrained(HF_DIR) (fp32, on the CPU): the check that the
export loads in the library users hand it to (the GPU machine has transformers;
dev/bench_gpu.sh section interop).
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_reference import forward  # noqa: E402

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[begin:end])
        t = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]).float()
    return tensors


def transformers_logits(hf_dir, idx):
    from transformers import GPT2LMHeadModel

    # fp32 whatever the file's dtype; the keyword is `dtype` since transformers
    # 4.56 (`torch_dtype` before, deprecated after)
    try:
        model = GPT2LMHeadModel.from_pretrained(hf_dir, dtype=torch.float32)
    except TypeError:
        model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(idx).logits


def main():
    hf_dir, tokens_path, out_path = sys.argv[1:4]
    if os.environ.get("ZERO_HF_TRANSFORMERS") == "1":
        with open(tokens_path, "rb") as f:
            B, T = struct.unpack("ii", f.read(8))
            ids = torch.frombuffer(bytearray(f.read()), dtype=torch.int32).long()
        logits = transformers_logits(hf_dir, ids[: B * T].reshape(B, T))
        with open(out_path, "wb") as f:
            f.write(logits.float().contiguous().numpy().tobytes())
        print(f"hf_reference: transformers' GPT2LMHeadModel from {hf_dir}")
        return
    with open(os.path.join(hf_dir, "config.json")) as f:
        config = json.load(f)
    st = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    pre = "transformer." if "transformer.wte.weight" in st else ""
    L, C, NH, V = config["n_layer"], config["n_embd"], config["n_head"], config["vocab_size"]

    def layers(name, transpose=False):
        ts = [st[f"{pre}h.{l}.{name}"] for l in range(L)]
        return torch.stack([t.T if transpose else t for t in ts])

    p = {
        "wte": st[pre + "wte.weight"], "wpe": st[pre + "wpe.weight"],
        "ln1w": layers("ln_1.weight"), "ln1b": layers("ln_1.bias"),
        "qkvw": layers("attn.c_attn.weight", True), "qkvb": layers("attn.c_attn.bias"),
        "attprojw": layers("attn.c_proj.weight", True), "attprojb": layers("attn.c_proj.bias"),
        "ln2w": layers("ln_2.weight"), "ln2b": layers("ln_2.bias"),
        "fcw": layers("mlp.c_fc.weight", True), "fcb": layers("mlp.c_fc.bias"),
        "fcprojw": layers("mlp.c_proj.weight", True), "fcprojb": layers("mlp.c_proj.bias"),
        "lnfw": st[pre + "ln_f.weight"], "lnfb": st[pre + "ln_f.bias"],
    }
    with open(tokens_path, "rb") as f:
        B, T = struct.unpack("ii", f.read(8))
        ids = torch.frombuffer(bytearray(f.read()), dtype=torch.int32).long()
    idx, targets = ids[: B * T].reshape(B, T), ids[B * T: 2 * B * T].reshape(B, T)
    with torch.no_grad():
        logits, loss = forward(dict(C=C, NH=NH, L=L, V=V), p, idx, targets)
    with open(out_path, "wb") as f:
        f.write(logits.float().contiguous().numpy().tobytes())
    print(f"hf_reference: {len(st)} tensors from {hf_dir}, loss {loss.item():.6f}")


if __name__ == "__main__":
    main()

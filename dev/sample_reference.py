#!/usr/bin/python3
"""Greedy decoding with the PyTorch GPT-2 of dev/gpt2_reference.py, the oracle
for --sample --temperature 0: from an llm.c model file (fp32) and prompt
tokens, appends the most likely token N times and writes the new tokens.

usage: sample_reference.py MODEL PROMPT_TOKENS N OUT
  PROMPT_TOKENS: int32 count, then the prompt's tokens (int32)
  OUT:           int32 N new tokens
"""
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_reference import forward, read_model  # noqa: E402


def main():
    model, prompt_path, n, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cfg, params, _ = read_model(model)
    with open(prompt_path, "rb") as f:
        (count,) = struct.unpack("i", f.read(4))
        tokens = list(struct.unpack(f"{count}i", f.read(4 * count)))
    new = []
    with torch.no_grad():
        for _ in range(n):
            idx = torch.tensor([tokens], dtype=torch.long)
            logits, _ = forward(cfg, params, idx, torch.zeros_like(idx))
            nxt = int(logits[0, -1].argmax())  # the first of equal maxima: the lowest id
            tokens.append(nxt)
            new.append(nxt)
    with open(out_path, "wb") as f:
        f.write(struct.pack(f"{n}i", *new))


if __name__ == "__main__":
    main()

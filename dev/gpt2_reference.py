#!/usr/bin/python3
"""The independent oracle: GPT-2 in PyTorch, built from one of our llm.c model
files, evaluated on one batch of tokens.

Writes, for the test in test/test_oracle.cpp to compare against:
  * the logits of every position (B, T, V) and the mean cross-entropy loss,
  * the gradient of that loss with respect to every parameter, in the model
    file's (tensor-major) order,
  * the losses of `--steps` AdamW steps on that same batch (decoupled weight
    decay on matrices and embeddings only, global-norm clipping, constant lr).

Only the model file and the tokens come from our code; the math is PyTorch's.
Reference generation only: nothing on the product path uses Python.

usage: gpt2_reference.py MODEL TOKENS OUT [--steps 10 --lr 1e-3 --wd 0.1 --clip 1.0]
  TOKENS: int32 B, T, then B*T inputs and B*T targets (int32)
  OUT:    float32 loss, B*T*V logits, P gradients (file order), then `steps` losses
"""
import argparse
import struct

import numpy as np
import torch
import torch.nn.functional as F


def read_model(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype=np.int32)
        assert header[0] == 20240326, "not an llm.c model file"
        assert header[1] == 3, "the oracle reads fp32 (version 3) model files"
        maxT, V, L, NH, C, Vp = (int(x) for x in header[2:8])
        flat = np.frombuffer(f.read(), dtype=np.float32)
    shapes = [
        ("wte", (Vp, C)), ("wpe", (maxT, C)),
        ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)),
        ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
        ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
        ("lnfw", (C,)), ("lnfb", (C,)),
    ]
    params, off = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        params[name] = torch.tensor(flat[off:off + n].reshape(shape), requires_grad=True)
        off += n
    assert off == flat.size, "model file size does not match its header"
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), params, [name for name, _ in shapes]


def forward(cfg, p, idx, targets):
    B, T = idx.shape
    C, NH, L, V = cfg["C"], cfg["NH"], cfg["L"], cfg["V"]
    hs = C // NH
    x = p["wte"][idx] + p["wpe"][:T]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        qkv = h @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (hs ** 0.5)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = F.gelu(h @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = (x @ p["wte"].T)[:, :, :V]  # the tied head; padded vocabulary columns are not part of the loss
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    return logits, loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    args = ap.parse_args()
    torch.manual_seed(0)

    cfg, params, order = read_model(args.model)
    with open(args.tokens, "rb") as f:
        B, T = struct.unpack("ii", f.read(8))
        data = np.frombuffer(f.read(), dtype=np.int32)
    idx = torch.tensor(data[: B * T].reshape(B, T), dtype=torch.long)
    targets = torch.tensor(data[B * T: 2 * B * T].reshape(B, T), dtype=torch.long)

    logits, loss = forward(cfg, params, idx, targets)
    loss.backward()
    grads = np.concatenate([params[n].grad.detach().numpy().ravel() for n in order])
    out = [np.array([loss.item()], dtype=np.float32), logits.detach().numpy().ravel(), grads]

    # AdamW steps on the same batch
    decay = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
    groups = [
        {"params": [params[n] for n in order if n in decay], "weight_decay": args.wd},
        {"params": [params[n] for n in order if n not in decay], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        _, loss = forward(cfg, params, idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([params[n] for n in order], args.clip)
        opt.step()
        losses.append(loss.item())
    out.append(np.array(losses, dtype=np.float32))

    with open(args.out + ".tmp", "wb") as f:
        for a in out:
            f.write(a.astype(np.float32).tobytes())
    import os
    os.replace(args.out + ".tmp", args.out)
    print(f"reference written: loss {out[0][0]:.6f}, {args.steps} AdamW losses {losses[0]:.6f} .. {losses[-1]:.6f}")


if __name__ == "__main__":
    main()

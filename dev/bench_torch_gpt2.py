#!/usr/bin/env python3
"""GPT-2 124M in PyTorch the way people write it today, timed: the peer that
dev/bench_gpu.sh section `peers` holds our trainer against (same GPU, same
call, same data, batch and sequence length).

An nn.Module GPT-2 (pre-LN, GELU tanh, tied token embedding and LM head, vocab
50257 padded to 50304 as nanoGPT does), F.scaled_dot_product_attention with
is_causal=True, torch.compile(model), torch.optim.AdamW(fused=True), bf16
autocast, TF32 matmuls. The optimizer matches train_gpt2_zero's defaults
(zero/run/options.h; llm.c's are the same): lr 3e-4 constant (no warm-up, no
decay), betas (0.9, 0.95), eps 1e-8, weight decay 0.0, gradient clipping at
global norm 1.0. Weights are nanoGPT's init (normal 0.02, the residual
projections 0.02 / sqrt(2 L)).

Data: an llm.c token shard (data/mobydick/mobydick_train.bin): a header of 256
int32 (magic 20240520, version 1, token count N), then N uint16 tokens. Batch k
is tokens [k B T, k B T + B T + 1), as llm.c's loader and ours read it; past
the end it starts over.

Prints one line per step (loss, ms, tok/s), the first step's time (which holds
torch.compile's compilation) separately, and last
    torch.compile GPT-2: median N tok/s over K steps
(the median over the steps after --warmup; "eager GPT-2" when not compiled).

It also runs on a CPU and on torch 1.13 (Debian's python3-torch) in a tiny
shape, for the test (CTest: bench_torch_gpt2): --device cpu --no_compile
--layers 2 --width 64 --heads 2 --steps 2 -B 2 -T 32. SDPA, torch.compile and
fused AdamW are used where the torch has them; without SDPA the attention is
written out with a causal mask.

Reference measurement only (Python lives under dev/, never on the product path).
"""
import argparse
import array
import inspect
import math
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHARD_MAGIC = 20240520
SHARD_HEADER_INTS = 256


def read_shard(path):
    """All of a shard's tokens as one int64 tensor (no numpy: torch's wheel does not require it)."""
    with open(path, "rb") as f:
        head = f.read(4 * SHARD_HEADER_INTS)
        if len(head) < 4 * SHARD_HEADER_INTS:
            sys.exit("%s: not an llm.c token shard (shorter than its header)" % path)
        header = struct.unpack("<%di" % SHARD_HEADER_INTS, head)
        if header[0] != SHARD_MAGIC or header[1] != 1:
            sys.exit("%s: not an llm.c token shard (magic %d, version %d)" % (path, header[0], header[1]))
        n = header[2]
        tokens = array.array("H")
        tokens.frombytes(f.read(2 * n))
    if len(tokens) != n:
        sys.exit("%s: the header says %d tokens, the file holds %d" % (path, n, len(tokens)))
    if sys.byteorder != "little":
        tokens.byteswap()
    # torch < 2.3 has no uint16: read as int16, widen, and take the low 16 bits back
    return torch.frombuffer(tokens, dtype=torch.int16).to(torch.int64) & 0xFFFF


class Batches:
    """Batch k: tokens [k B T, k B T + B T + 1), inputs the first B T, targets shifted by one."""

    def __init__(self, tokens, B, T):
        if len(tokens) < B * T + 1:
            sys.exit("the shard has %d tokens, fewer than B*T+1 = %d" % (len(tokens), B * T + 1))
        self.tokens, self.B, self.T, self.pos = tokens, B, T, 0

    def next(self):
        n = self.B * self.T + 1
        if self.pos + n > len(self.tokens):
            self.pos = 0
        chunk = self.tokens[self.pos:self.pos + n]
        self.pos += self.B * self.T
        return chunk[:-1].view(self.B, self.T), chunk[1:].view(self.B, self.T)


class CausalSelfAttention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.c_proj.residual = True

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)
        self.c_proj.residual = True

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, H)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, L, C, H, V, max_T):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(max_T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * L) if getattr(m, "residual", False) else 0.02
                nn.init.normal_(m.weight, mean=0.0, std=std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def make_optimizer(model, args, device):
    kwargs = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=args.weight_decay)
    fused = False
    if device.type == "cuda" and not args.no_fused and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        kwargs["fused"] = fused = True
    return torch.optim.AdamW(model.parameters(), **kwargs), fused


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-B", type=int, default=16, help="sequences per step")
    p.add_argument("-T", type=int, default=1024, help="sequence length")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the median (the first holds compilation)")
    p.add_argument("-i", "--input", default="data/mobydick/mobydick_train.bin", help="llm.c token shard")
    p.add_argument("--device", default="cuda")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50304, help="50257 padded to a multiple of 128")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16", help="autocast dtype (fp32: none)")
    p.add_argument("--no_compile", action="store_true", help="eager: no torch.compile")
    p.add_argument("--no_fused", action="store_true", help="AdamW without fused=True")
    p.add_argument("--seed", type=int, default=1337)
    args = p.parse_args()

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    # TF32 for what autocast leaves in fp32. Torch >= 2.9 has fp32_precision and
    # refuses a mix of it with the older allow_tf32 flags: one API, never both
    try:  # torch 1.13's matmul module raises AssertionError for an unknown name, not AttributeError
        new_api = hasattr(torch.backends.cuda.matmul, "fp32_precision")
    except AssertionError:
        new_api = False
    if new_api:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
    else:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("high")

    batches = Batches(read_shard(args.input), args.B, args.T)
    model = GPT2(args.layers, args.width, args.heads, args.vocab, max(1024, args.T)).to(device)
    model.train()
    n_params = sum(t.numel() for t in model.parameters())
    optimizer, fused = make_optimizer(model, args, device)
    compiled = not args.no_compile and hasattr(torch, "compile")
    if not args.no_compile and not compiled:
        print("note: torch %s has no torch.compile: eager" % torch.__version__)
    step_model = torch.compile(model) if compiled else model
    use_autocast = args.dtype == "bf16"
    print("torch %s, %s (%s), L %d C %d H %d V %d, %.2fM parameters, B %d T %d, %s, AdamW%s, autocast %s, SDPA %s"
          % (torch.__version__, device, torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
             args.layers, args.width, args.heads, args.vocab, n_params / 1e6, args.B, args.T,
             "torch.compile" if compiled else "eager", " fused" if fused else "", args.dtype if use_autocast else "off",
             "yes" if hasattr(F, "scaled_dot_product_attention") else "no (written out)"))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    tokens_per_step = args.B * args.T
    times, losses = [], []
    for step in range(1, args.steps + 1):
        x, y = batches.next()
        if device.type == "cuda":
            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        sync()
        t0 = time.perf_counter()
        if use_autocast:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = step_model(x, y)
        else:
            loss = step_model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()  # waits for the step, as printing the loss does
        sync()
        dt = time.perf_counter() - t0
        times.append(dt)
        losses.append(loss_value)
        print("step %4d/%d | loss %.6f | norm %.4f | %.2f ms | %.0f tok/s"
              % (step, args.steps, loss_value, float(norm), dt * 1e3, tokens_per_step / dt), flush=True)

    print("first step %.2f s (%s)" % (times[0], "torch.compile's compilation included" if compiled else "eager"))
    warmup = min(args.warmup, args.steps - 1)
    timed = sorted(times[warmup:])
    k = len(timed)
    median = timed[k // 2] if k % 2 else (timed[k // 2 - 1] + timed[k // 2]) / 2
    if device.type == "cuda":
        print("peak memory %.1f MiB" % (torch.cuda.max_memory_allocated(device) / 2**20))
    if not all(math.isfinite(v) for v in losses):
        print("loss is not finite")
    print("%s GPT-2: median %.0f tok/s over %d steps" % ("torch.compile" if compiled else "eager",
                                                         tokens_per_step / median, k))


if __name__ == "__main__":
    main()

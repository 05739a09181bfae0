"""The delayed parameter update's cost in accuracy, apart from this trainer: the
same rule in PyTorch (dev/bench_torch_gpt2.py's GPT-2), for an independent look
at what dev/delayed_update_mobydick.sh measures in ours.

make train's shape (4 layers, 128 wide, 4 heads, B 16, T 64), 300 steps, AdamW
(betas 0.9/0.95, weight decay 0.1 on matrices and embeddings), warm-up 20 steps
then cosine to 0.1 of the peak, clip 1.0, on Moby-Dick with every token id taken
modulo VOCAB (2048: a full 50257-token classifier takes torch 1.13 on two cores
over 25 minutes a run). After W ordinary steps, the parameters the forward and
backward use are those from before the last update; AdamW sees every gradient
once, in order.

    /usr/bin/python3 dev/delayed_update_torch.py W [LR=2e-3] [VOCAB=2048]
prints the mean training loss of the last 20 steps and the validation loss
(30 batches). Run W 0 and W 5 side by side; each takes about 8 minutes here.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch_gpt2 as g  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run(W, lr, vocab, steps=300, seed=0):
    torch.manual_seed(seed)
    model = g.GPT2(4, 128, 4, vocab, 64)
    params = list(model.parameters())
    master = [torch.nn.Parameter(p.detach().clone()) for p in params]  # what AdamW updates
    opt = torch.optim.AdamW([{"params": [m for m in master if m.dim() >= 2], "weight_decay": 0.1},
                             {"params": [m for m in master if m.dim() < 2], "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    shard = lambda name: g.read_shard(os.path.join(ROOT, "data/mobydick", name)) % vocab
    train = g.Batches(shard("mobydick_train.bin"), 16, 64)
    pending, losses = None, []
    for t in range(1, steps + 1):
        for p in params:
            p.grad = None
        loss = model(*train.next())
        loss.backward()
        losses.append(loss.item())
        norm = math.sqrt(sum(float((p.grad.float() ** 2).sum()) for p in params))
        clip = min(1.0, 1.0 / (norm + 1e-6))
        cur = lr * t / 20 if t <= 20 else lr * (0.1 + 0.45 * (1 + math.cos(math.pi * (t - 20) / (steps - 20))))
        for group in opt.param_groups:
            group["lr"] = cur
        for m, p in zip(master, params):
            m.grad = p.grad * clip
        opt.step()
        new = [m.detach().clone() for m in master]
        with torch.no_grad():
            if W and t > W:  # the device gets the update before this one; this one waits a step
                if pending is not None:
                    for p, v in zip(params, pending):
                        p.copy_(v)
                pending = new
            else:
                for p, v in zip(params, new):
                    p.copy_(v)
    val = g.Batches(shard("mobydick_val.bin"), 16, 64)
    with torch.no_grad():
        val_loss = sum(model(*val.next()).item() for _ in range(30)) / 30
    return sum(losses[-20:]) / 20, val_loss


if __name__ == "__main__":
    torch.set_num_threads(1)
    W = int(sys.argv[1])
    lr = float(sys.argv[2]) if len(sys.argv) > 2 else 2e-3
    vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
    tr, va = run(W, lr, vocab)
    print("W %d, lr %g, vocab %d: training loss (last 20 steps) %.4f, validation loss %.4f" % (W, lr, vocab, tr, va))

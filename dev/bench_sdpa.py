#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention, forward + backward, timed on the GPU:
the bar our hand-written attention is held to (dev/bench_gpu.sh). Prints one line
per backend: "sdpa <backend> fwd_ms bwd_ms fwd+bwd_ms".

Reference measurement only (Python lives under dev/, never on the product path).
usage: bench_sdpa.py [B T NH HS]
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    B, T, NH, HS = (int(x) for x in sys.argv[1:5]) if len(sys.argv) >= 5 else (8, 1024, 12, 64)
    q, k, v = (torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16)
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out = fwd()

                def both():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    torch.autograd.grad(o, (q, k, v), g)

                f_ms, fb_ms = time_ms(fwd), time_ms(both)
                print(f"sdpa {name} {f_ms:.4f} {fb_ms - f_ms:.4f} {fb_ms:.4f}")
        except RuntimeError as e:
            print(f"sdpa {name} unavailable: {str(e).splitlines()[0]}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the small seed inputs of the fuzz targets (test/fuzz/corpus/<target>/)
that are not copies of files the trainer writes: token shards, a tokenizer, a
tiny encoder.json + vocab.bpe pair, DeepSpeed configs, JSON documents and
launcher environments. Run from the repository root; the model files, state
files and manifests come from a tiny training run (see test/fuzz/README.md)."""
import json
import os
import struct

ROOT = "test/fuzz/corpus"


def put(target, name, data):
    os.makedirs(f"{ROOT}/{target}", exist_ok=True)
    with open(f"{ROOT}/{target}/{name}", "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def shard(tokens, magic=20240520, version=1, count=None):
    header = [0] * 256
    header[0], header[1], header[2] = magic, version, len(tokens) if count is None else count
    return struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens)


# token shards: a valid one, a short one, one with tokens past a 512 vocabulary
put("shard", "valid", shard([(i * 7 + 3) % 512 for i in range(300)]))
put("shard", "tiny", shard([1, 2, 3, 4, 5]))
put("shard", "big_tokens", shard([60000 + i for i in range(64)]))
put("shard", "count_mismatch", shard([1] * 40, count=100))

# gpt2_tokenizer.bin: version 2, 260 tokens, EOT last
tokens = [bytes([b]) for b in range(256)] + [b"the", b" and", b"ing", b"<|endoftext|>"]
header = [0] * 256
header[0], header[1], header[2], header[3] = 20240328, 2, len(tokens), len(tokens) - 1
put("tokenizer", "v2", struct.pack("<256I", *header) + b"".join(bytes([len(t)]) + t for t in tokens))
header[1] = 1
put("tokenizer", "v1_short", struct.pack("<256I", *header) + b"".join(bytes([len(t)]) + t for t in tokens[:20]))


# encoder.json + vocab.bpe: GPT-2's byte alphabet, a few merges, EOT
def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


alphabet = byte_alphabet()
merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("in", "g"), ("Ġ", "a")]
encoder = {ch: i for i, ch in enumerate(alphabet)}
for a, b in merges:
    encoder[a + b] = len(encoder)
encoder["<|endoftext|>"] = len(encoder)
vocab = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
put("bpe", "tiny", json.dumps(encoder, ensure_ascii=False) + "\0" + vocab + "\0" + "the thing in the sea\nthe end")
put("bpe", "no_text", json.dumps(encoder, ensure_ascii=False) + "\0" + vocab)

# JSON documents and DeepSpeed configs
configs = {
    "stage3": {"train_batch_size": 4, "gradient_accumulation_steps": 1,
               "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                     "offload_param": {"device": "cpu"}, "overlap_comm": True,
                                     "reduce_bucket_size": 5e8, "stage3_prefetch_bucket_size": "auto"},
               "bf16": {"enabled": True}, "gradient_clipping": 1.0},
    "fp16_adam": {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                  "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 12, "hysteresis": 2},
                  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8,
                                                            "weight_decay": 0.1}},
                  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10, "warmup_max_lr": 3e-4,
                                                                    "total_num_steps": 100}}},
    "cosine": {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
               "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 5, "cos_min_ratio": 0.1,
                                                                  "total_num_steps": 50}},
               "activation_checkpointing": {"cpu_checkpointing": True, "partition_activations": False},
               "steps_per_print": 10, "wall_clock_breakdown": False, "tensorboard": {"enabled": False}},
    "typo": {"zero_optimization": {"stgae": 3}},
}
for name, c in configs.items():
    put("deepspeed", name, json.dumps(c, indent=1))
    put("json", "ds_" + name, json.dumps(c))
# DeepSpeed reads its configs with hjson: comments and trailing commas
put("deepspeed", "hjson", '{\n  // comments\n  "train_batch_size": 8, # a line\n  /* a block */ "bf16": {"enabled": true,},\n'
    '  "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear"}},\n}\n')
put("json", "escapes", '{"a": "\\u00e9\\uD83D\\uDE00\\n\\t", "b": [1, -0.5e-3, 1E+2, true, false, null, {}], "c": []}')
put("json", "deep", "[" * 100 + "]" * 100)
put("json", "bad_comma", '{"a": 1,}')
put("json", "bom", "\ufeff{\"x\": 9007199254740993}")

# launcher environments: one value per line, in fuzz_launch_env.cpp's order
put("launch_env", "openmpi", "1\n4\n1\n")
put("launch_env", "slurm", "\n\n\n3\n8\n3\n")
put("launch_env", "torchrun", "\n\n\n\n\n\n0\n2\n0\nhost0\n29501\n30\n\njob7\n")
put("launch_env", "bad", "x\n-1\n\n")


# safetensors: an 8-byte header length, the JSON header, the tensors' bytes
def safetensors(tensors, metadata=None, pad=True):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


f32 = lambda n: struct.pack(f"<{n}f", *[0.25 * i - 1 for i in range(n)])
u16 = lambda n: struct.pack(f"<{n}H", *[0x3C00 + i for i in range(n)])  # fp16 / bf16 bit patterns
put("safetensors", "f32", safetensors([("wte.weight", "F32", [4, 3], f32(12)), ("ln_f.bias", "F32", [3], f32(3))],
                                      {"format": "pt"}))
put("safetensors", "f16_bf16", safetensors([("a", "F16", [2, 2], u16(4)), ("b", "BF16", [5], u16(5))]))
put("safetensors", "scalar_empty", safetensors([("s", "F32", [], f32(1)), ("e", "F32", [0, 3], b"")], pad=False))
put("safetensors", "short_data", safetensors([("x", "F32", [2], f32(2))])[:-4] + f32(1))

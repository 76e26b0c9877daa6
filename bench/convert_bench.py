#!/usr/bin/env python3
"""Conversion speed of `triad convert` on a 1.5B-class model (BENCHMARKS.md).

Writes, once, a Hugging Face folder shaped exactly like Qwen2.5-1.5B (28 layers, hidden 1536,
12 / 2 heads, FFN 8960, vocabulary 151936, tied embeddings; 1.54 B parameters) with random BF16
weights in two safetensors shards, as the real checkpoint ships (3.1 GB), and a small byte-level
BPE tokenizer (the vocabulary is padded to 151936 as the converter pads any short one). Then
converts it to each --outtype, cold (page cache dropped for the folder's files when the kernel
lets us: posix_fadvise DONTNEED) and warm, and reports seconds and MB/s of input. Needs numpy,
safetensors and tokenizers (PyPI); no torch.

usage: bench/convert_bench.py [--dir CACHE_DIR] [--bin build/apps/triad/triad] [--types f16,bf16,q8_0]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time

import numpy as np

CFG = {
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
    "num_key_value_heads": 2, "intermediate_size": 8960, "vocab_size": 151936, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}


def bf16(rng, shape, scale):
    """Random normal values rounded to bfloat16 bit patterns (uint16), generated in slices."""
    out = np.empty(shape, dtype=np.uint16)
    flat = out.reshape(-1)
    step = 1 << 22
    for i in range(0, flat.size, step):
        n = min(step, flat.size - i)
        x = (rng.standard_normal(n, dtype=np.float32) * scale).view(np.uint32)
        flat[i:i + n] = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    return out


def write_shard(path, tensors):
    """A safetensors file by hand (BF16 is not a numpy dtype): header, then the raw bytes."""
    header, offset = {}, 0
    for name, arr in tensors:
        header[name] = {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for _, arr in tensors:
            f.write(arr.tobytes())


def make_folder(d):
    if os.path.exists(os.path.join(d, "done")):
        return
    os.makedirs(d, exist_ok=True)
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 10,
                            trainer=trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump(CFG, open(os.path.join(d, "config.json"), "w"))
    rng = np.random.default_rng(0)
    E, F, L, H, KV, V = 1536, 8960, 28, 12, 2, 151936
    D = E // H
    names, weight_map = [], {}
    shards = [[], []]
    shards[0].append(("model.embed_tokens.weight", bf16(rng, (V, E), 0.02)))
    for i in range(L):
        p = f"model.layers.{i}."
        s = shards[0] if i < L // 2 else shards[1]
        s.append((p + "input_layernorm.weight", bf16(rng, (E,), 0.1)))
        s.append((p + "post_attention_layernorm.weight", bf16(rng, (E,), 0.1)))
        s.append((p + "self_attn.q_proj.weight", bf16(rng, (H * D, E), 0.02)))
        s.append((p + "self_attn.q_proj.bias", bf16(rng, (H * D,), 0.02)))
        s.append((p + "self_attn.k_proj.weight", bf16(rng, (KV * D, E), 0.02)))
        s.append((p + "self_attn.k_proj.bias", bf16(rng, (KV * D,), 0.02)))
        s.append((p + "self_attn.v_proj.weight", bf16(rng, (KV * D, E), 0.02)))
        s.append((p + "self_attn.v_proj.bias", bf16(rng, (KV * D,), 0.02)))
        s.append((p + "self_attn.o_proj.weight", bf16(rng, (E, H * D), 0.02)))
        s.append((p + "mlp.gate_proj.weight", bf16(rng, (F, E), 0.02)))
        s.append((p + "mlp.up_proj.weight", bf16(rng, (F, E), 0.02)))
        s.append((p + "mlp.down_proj.weight", bf16(rng, (E, F), 0.02)))
    shards[1].append(("model.norm.weight", bf16(rng, (E,), 0.1)))
    for k, s in enumerate(shards):
        fn = f"model-0000{k + 1}-of-00002.safetensors"
        write_shard(os.path.join(d, fn), s)
        for n, _ in s:
            weight_map[n] = fn
            names.append(n)
    json.dump({"metadata": {}, "weight_map": weight_map}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    open(os.path.join(d, "done"), "w").close()


def drop_cache(d):
    for fn in os.listdir(d):
        if fn.endswith(".safetensors"):
            fd = os.open(os.path.join(d, fn), os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", ".cache", "bench-qwen2.5-1.5b-bf16"))
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "apps", "triad", "triad"))
    ap.add_argument("--types", default="f16,bf16,q8_0")
    ap.add_argument("--out", default="/tmp")
    a = ap.parse_args()
    t0 = time.time()
    make_folder(a.dir)
    size = sum(os.path.getsize(os.path.join(a.dir, f)) for f in os.listdir(a.dir) if f.endswith(".safetensors"))
    print(f"# folder {a.dir}: {size / 1e9:.2f} GB of BF16 safetensors (made or found in {time.time() - t0:.0f} s)")
    print(f"{'outtype':<8} {'cache':<6} {'seconds':>8} {'MB/s in':>8} {'out MB':>8}")
    for t in a.types.split(","):
        for cache in ("cold", "warm"):
            if cache == "cold":
                drop_cache(a.dir)
            out = os.path.join(a.out, f"convert-bench-{t}.gguf")
            t1 = time.time()
            p = subprocess.run([a.bin, "convert", a.dir, "-o", out, "--outtype", t], capture_output=True, text=True)
            dt = time.time() - t1
            if p.returncode != 0:
                raise SystemExit(p.stderr[-2000:])
            m = re.search(r"wrote .*", p.stdout + p.stderr)
            print(f"{t:<8} {cache:<6} {dt:8.2f} {size / 1e6 / dt:8.0f} {os.path.getsize(out) / 1e6:8.0f}   {m.group(0) if m else ''}",
                  flush=True)
            os.remove(out)


if __name__ == "__main__":
    main()

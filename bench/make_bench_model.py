#!/usr/bin/env python3
"""Writes a random-weight GGUF shaped like Qwen2.5-0.5B (qwen2: hidden 896, 24 layers, 14 heads,
2 KV heads, FFN 4864, vocab 151936) for `triad bench`, in F16 or Q8_0.

The weights are random (N(0, 0.02)), so the model's output is meaningless: it exists to measure
speed on a realistic shape. The vocabulary metadata is a byte-level SPM vocab padded with unused
tokens to the embedding's row count (the bench feeds random token ids; the padding lets
llama.cpp's llama-bench load the file for side-by-side runs).

With --shape qwen1.5b the shape is Qwen2.5-1.5B's (hidden 1536, 28 layers, 12 / 2 heads, FFN
8960): every row length a multiple of 256, so K-quants apply without fallbacks (the quantization
benchmark uses it).

With --shape qwen3moe-30b the model is a qwen3moe shaped like Qwen3-30B-A3B (hidden 2048, 32 / 4
heads of 128, 128 experts of FFN 768, 8 used per token, q/k norms, untied output), with 4 layers
unless --layers says otherwise (48 in the real model): the MoE benchmark.

With --shape deepseek2-lite the model is a deepseek2 shaped like DeepSeek-V2-Lite (hidden 2048,
16 heads with multi-head latent attention: kv rank 512 + 64 rotary dims, q/k head 128 + 64,
v head 128, no q LoRA, split attn_k_b / attn_v_b; the first layer dense with FFN 10944, then 64
experts of FFN 1408 with 6 used by softmax, not renormalized, and 2 shared experts; YaRN x40
over 4096 with yarn_log_multiplier 0.0707; vocab 102400), 4 layers unless --layers says
otherwise (27 in the real model).

usage: make_bench_model.py OUT.gguf --type f16|q8_0 [--layers N]
                           [--shape qwen0.5b|qwen1.5b|tiny|qwen3moe-30b|deepseek2-lite]
"""
import argparse
import sys

import numpy as np

try:
    import gguf
    from gguf import quants
except ImportError:
    sys.exit("make_bench_model.py: PyPI package 'gguf' is missing (pip install gguf)")

SHAPES = {"qwen0.5b": (896, 24, 14, 2, 4864, 151936), "qwen1.5b": (1536, 28, 12, 2, 8960, 151936),
          # every row a multiple of 256, so each weight type applies without fallbacks (tests)
          "tiny": (256, 2, 4, 2, 512, 1024),
          "qwen3moe-30b": (2048, 4, 32, 4, 6144, 151936),
          "deepseek2-lite": (2048, 4, 16, 1, 10944, 102400)}  # one latent KV head (MLA)
MOE = {"qwen3moe-30b": dict(head_dim=128, n_expert=128, n_used=8, ffn_exp=768),
       "deepseek2-lite": dict(head_dim=192, n_expert=64, n_used=6, ffn_exp=1408, shared=2, dense_lead=1,
                              kv_rank=512, rope=64, v_head=128)}
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = SHAPES["qwen0.5b"]


def vocab(n):
    """A byte-level SPM vocabulary padded with unused tokens to n entries: llama.cpp checks that
    the embedding has one row per token, so the padding lets llama-bench load the same file."""
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    toks += [f"<unused{i}>" for i in range(n - len(toks))]
    types += [5] * (n - len(types))
    return toks, [0.0] * len(toks), types


def deepseek_layer(b, il, moe, mat, vec, w, rng):
    """One deepseek2 layer: latent attention, then the dense FFN or routed + shared experts."""
    R, D, V, H = moe["kv_rank"], moe["rope"], moe["v_head"], HEADS
    mat(b + "attn_q.weight", H * moe["head_dim"], HIDDEN)
    mat(b + "attn_kv_a_mqa.weight", R + D, HIDDEN)
    vec(b + "attn_kv_a_norm.weight", R)
    mat(b + "attn_k_b.weight", R, moe["head_dim"] - D, H)
    mat(b + "attn_v_b.weight", V, R, H)
    mat(b + "attn_output.weight", HIDDEN, H * V)
    vec(b + "ffn_norm.weight", HIDDEN)
    if il < moe["dense_lead"]:
        mat(b + "ffn_gate.weight", FFN, HIDDEN)
        mat(b + "ffn_up.weight", FFN, HIDDEN)
        mat(b + "ffn_down.weight", HIDDEN, FFN)
        return
    w.add_tensor(b + "ffn_gate_inp.weight", rng.standard_normal((moe["n_expert"], HIDDEN), dtype=np.float32) * 0.02)
    mat(b + "ffn_gate_exps.weight", moe["ffn_exp"], HIDDEN, moe["n_expert"])
    mat(b + "ffn_up_exps.weight", moe["ffn_exp"], HIDDEN, moe["n_expert"])
    mat(b + "ffn_down_exps.weight", HIDDEN, moe["ffn_exp"], moe["n_expert"])
    fs = moe["ffn_exp"] * moe["shared"]
    mat(b + "ffn_gate_shexp.weight", fs, HIDDEN)
    mat(b + "ffn_up_shexp.weight", fs, HIDDEN)
    mat(b + "ffn_down_shexp.weight", HIDDEN, fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen0.5b")
    a = ap.parse_args()
    global HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB
    HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = SHAPES[a.shape]
    if a.layers is None:
        a.layers = LAYERS
    rng = np.random.default_rng(0)
    moe = MOE.get(a.shape)
    ds = a.shape == "deepseek2-lite"
    w = gguf.GGUFWriter(a.out, "deepseek2" if ds else "qwen3moe" if moe else "qwen2")
    w.add_name(f"{a.shape}-shaped-random-{a.type}")
    w.add_context_length(32768)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    if ds:
        R, D = moe["kv_rank"], moe["rope"]
        w.add_q_lora_rank(0)  # llama.cpp reads the key unless the model has 26/27 layers
        w.add_kv_lora_rank(R)
        w.add_key_length(R + D)
        w.add_value_length(R)
        w.add_key_length_mla(moe["head_dim"])
        w.add_value_length_mla(moe["v_head"])
        w.add_rope_dimension_count(D)
        w.add_leading_dense_block_count(moe["dense_lead"])
        w.add_expert_shared_count(moe["shared"])
        w.add_expert_weights_scale(1.0)
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(40.0)
        w.add_rope_scaling_orig_ctx_len(4096)
        w.add_rope_scaling_yarn_log_mul(0.0707)
        w.add_expert_count(moe["n_expert"])
        w.add_expert_used_count(moe["n_used"])
        w.add_expert_feed_forward_length(moe["ffn_exp"])
    elif moe:
        w.add_key_length(moe["head_dim"])
        w.add_value_length(moe["head_dim"])
        w.add_expert_count(moe["n_expert"])
        w.add_expert_used_count(moe["n_used"])
        w.add_expert_feed_forward_length(moe["ffn_exp"])
    toks, scores, types = vocab(VOCAB)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    qtype = gguf.GGMLQuantizationType.F16 if a.type == "f16" else gguf.GGMLQuantizationType.Q8_0

    def mat(name, rows, cols, n=0):
        shape = (n, rows, cols) if n else (rows, cols)
        x = (rng.standard_normal(shape, dtype=np.float32) * 0.02)
        if a.type == "f16":
            w.add_tensor(name, x.astype(np.float16))
        else:
            q = quants.quantize(x, qtype)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)

    def vec(name, n, value=None):
        x = np.ones(n, np.float32) if value is None else rng.standard_normal(n, dtype=np.float32) * value
        w.add_tensor(name, x)

    mat("token_embd.weight", VOCAB, HIDDEN)
    vec("output_norm.weight", HIDDEN)
    q_dim, kv_dim = HIDDEN, HIDDEN // HEADS * KV_HEADS
    if moe:
        q_dim, kv_dim = HEADS * moe["head_dim"], KV_HEADS * moe["head_dim"]
        mat("output.weight", VOCAB, HIDDEN)
    for il in range(a.layers):
        b = f"blk.{il}."
        vec(b + "attn_norm.weight", HIDDEN)
        if ds:
            deepseek_layer(b, il, moe, mat, vec, w, rng)
            print(f"\rmake_bench_model: layer {il + 1}/{a.layers}", end="", file=sys.stderr, flush=True)
            continue
        mat(b + "attn_q.weight", q_dim, HIDDEN)
        mat(b + "attn_k.weight", kv_dim, HIDDEN)
        mat(b + "attn_v.weight", kv_dim, HIDDEN)
        if moe:
            vec(b + "attn_q_norm.weight", moe["head_dim"])
            vec(b + "attn_k_norm.weight", moe["head_dim"])
        else:
            vec(b + "attn_q.bias", q_dim, 0.02)
            vec(b + "attn_k.bias", kv_dim, 0.02)
            vec(b + "attn_v.bias", kv_dim, 0.02)
        mat(b + "attn_output.weight", HIDDEN, q_dim)
        vec(b + "ffn_norm.weight", HIDDEN)
        if moe:
            w.add_tensor(b + "ffn_gate_inp.weight",
                         rng.standard_normal((moe["n_expert"], HIDDEN), dtype=np.float32) * 0.02)
            mat(b + "ffn_gate_exps.weight", moe["ffn_exp"], HIDDEN, moe["n_expert"])
            mat(b + "ffn_up_exps.weight", moe["ffn_exp"], HIDDEN, moe["n_expert"])
            mat(b + "ffn_down_exps.weight", HIDDEN, moe["ffn_exp"], moe["n_expert"])
        else:
            mat(b + "ffn_gate.weight", FFN, HIDDEN)
            mat(b + "ffn_up.weight", FFN, HIDDEN)
            mat(b + "ffn_down.weight", HIDDEN, FFN)
        print(f"\rmake_bench_model: layer {il + 1}/{a.layers}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"make_bench_model: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

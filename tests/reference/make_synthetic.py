"""Writes small random-weight GGUF models for the golden tests.

Usage: python make_synthetic.py OUT_DIR     (prints the files it wrote)

What it writes (all with the same llama-style SPM vocabulary of 512 tokens: <unk>, <s>, </s>,
256 <0xNN> byte tokens, single characters and common English word pieces, with scores and
token types, bos 1, eos 2):
  llama.gguf        llama, 256 wide, 8 q / 2 kv heads of 32, 2 layers, untied output
  llama_swa.gguf    llama, 128 wide, 8/2 heads of 16, 3 layers, sliding window 12, tied output
  llama_rope.gguf   llama, 128 wide, 4/4 heads of 32, 2 layers, partial rotary (16 of 32 dims),
                    freq_base 50000, linear rope scaling x4, untied
  qwen2.gguf        qwen2, 128 wide, 8/2 heads of 16, 3 layers, q/k/v biases, tied, base 1e6
  qwen3.gguf        qwen3, 128 wide, 8/2 heads of 32 (q dim 256 != n_embd), 3 layers, q/k norms
  gemma3.gguf       gemma3, 256 wide, 8/2 heads of 32, 7 layers (0-4 and 6 local, 5 global),
                    sliding window 10, global base 1e6, norm weights with the +1 baked in
  qwen3moe.gguf     qwen3moe, 128 wide, 8/2 heads of 32, 3 layers, 8 experts of FFN 64, 2 used
                    per token; the router rows of experts 6 and 7 are equal in every layer, so
                    their probabilities tie exactly (the lower id must win)
  qwen2moe.gguf     qwen2moe, 128 wide, 8/2 heads of 16, 2 layers, q/k/v biases, 6 experts of FFN
                    48, 4 used (weights not renormalized), a shared expert of FFN 96 with its
                    sigmoid gate, untied output; its last two experts tie too
  mixtral.gguf      llama with experts (Mixtral), 128 wide, 8/2 heads of 16, 2 layers, 4 experts
                    of FFN 96 (written as feed_forward_length only, as Mixtral's converter does),
                    2 used; the last two experts tie
  mixtral_split.gguf the same weights in the older per-expert layout: blk.N.ffn_gate.E.weight ...
                    (2-D), with the experts' tensors interleaved by expert, not by kind
  deepseek2.gguf    deepseek2 shaped like V3 / R1: 128 wide, 3 layers (the first dense, FFN 160),
                    4 heads with q LoRA rank 48, latent rank 48 + 16 rotary dims (qk_nope 24,
                    v_head 20), split attn_k_b / attn_v_b (key_length_mla form), YaRN x4 over
                    an original context of 4096 with yarn_log_multiplier 0.0707, 8 experts of
                    FFN 32 in 4 groups (2 used) with sigmoid scores, selection bias, 3 used,
                    renormalized and scaled by 2.5, one shared expert; last two experts tie
  deepseek2_lite.gguf deepseek2 shaped like V2-Lite: no q LoRA, the older attn_kv_b form, 2
                    layers (the first dense), softmax scores, 6 experts (2 used, not
                    renormalized), two shared experts, no rope scaling
  glm4moe.gguf      glm4moe (GLM-4.5 class): 128 wide, 3 layers (the first dense, FFN 160) plus one
                    multi-token-prediction layer that must not run, 4/2 heads of 48 with 24 rotary
                    dims (neox), q/k/v biases and QK norm, the pre-FFN norm as post_attention_norm,
                    8 experts of FFN 32 (3 used) scored by sigmoid (no gating key: the default)
                    with a selection bias, renormalized, scaled by 2.5, one ungated shared expert
  gpt-oss.gguf      gpt-oss: 128 wide, 4 layers alternating sliding-window (10, even layers) and
                    full, 8/2 heads of 16, YaRN x8 over an original context of 32, q/k/v/o biases,
                    attention sinks (one head's far above its scores), 4 experts of FFN 64 (2
                    used) with router and expert biases, gate/up scaled so the SwiGLU clamps at 7
  llama_yarn.gguf   llama_rope.gguf's shape with YaRN x4 over an original context of 32 instead
                    of linear scaling
  llama_yarn_4k.gguf, llama_rope_4k.gguf  a context of 4096 from an original 1024 (YaRN x4,
                    linear x4), GQA, full rotary
  llama_<type>.gguf llama.gguf with every 2-D weight stored as <type>: f16, bf16, q8_0, q4_0,
                    q4_1, q5_0, q5_1 (gguf.quants.quantize) and q4_k, q5_k, q6_k (kquants.py)
  gemma3_q4_k_m.gguf gemma3.gguf with the tensor-type mix of a llama.cpp Q4_K_M file (token_embd
                    Q8_0, attn_q/k Q5_0, attn_v Q8_0, attn_output Q4_K, ffn_gate/up Q5_0,
                    ffn_down Q6_K); norms stay F32
  qwen3moe_q5_0.gguf qwen3moe.gguf with every matrix, the stacked experts included, stored as
                    Q5_0, except the router (F32)

Properties: deterministic (fixed seeds per model, no timestamps), so every run writes
byte-identical files; weights ~N(0, gain/sqrt(n_in)) so activations and logits are O(1)
(attention neither uniform nor one-hot); norm weights 1 + N(0, 0.1).

Thread-safety: a script; concurrent runs must use different OUT_DIRs (files are written to a
temporary name and renamed into place).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import ExpertGatingFuncType, GGUFWriter, RopeScalingType
from gguf.quants import quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kquants  # noqa: E402

SPACE = "\u2581"

WORDS = (
    "the a and to of in was he she it is that for on with as his her they at be this had not "
    "but from by or one all were we there when an which their said if do will each about how up "
    "out them then many some so these would other into has more two like time see no way could "
    "people my than first been who its now long down day did get come made may part once upon "
    "little girl boy named play happy big dog cat sun tree ball park mom dad friend saw wanted "
    "went very red blue fun"
).split()
CHARS = list(SPACE + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"")
N_VOCAB = 512


def build_vocab():
    """(tokens, scores, types) of the shared test vocabulary, exactly N_VOCAB entries."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0, 0.0, 0.0] + [0.0] * 256
    pieces = []
    seen = set(tokens)

    def add(p):
        if p not in seen and len(tokens) + len(pieces) < N_VOCAB:
            seen.add(p)
            pieces.append(p)

    for ch in CHARS:
        add(ch)
    # Word pieces with every prefix, so SPM pair merging can reach each whole word.
    for w in WORDS:
        full = SPACE + w
        for n in range(2, len(full) + 1):
            add(full[:n])
    # Higher score = preferred merge: longer pieces first, then list order.
    ranked = sorted(range(len(pieces)), key=lambda i: (-len(pieces[i]), i))
    score_of = {pieces[i]: -float(r) for r, i in enumerate(ranked)}
    for p in pieces:
        tokens.append(p)
        types.append(1)
        scores.append(score_of[p] if len(p) > 1 else -1000.0 - CHARS.index(p))
    fill = 0
    while len(tokens) < N_VOCAB:     # pad with unused tokens (never produced by encoding)
        tokens.append(f"<unused{fill}>")
        types.append(5)
        scores.append(-1e9)
        fill += 1
    return tokens, scores, types


@dataclass(frozen=True)
class Spec:
    name: str
    arch: str
    seed: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    tied: bool
    rope_base: float = 10000.0
    rope_dims: int = 0           # 0 = head_dim
    rope_linear: float = 0.0     # 0 = no scaling
    window: int = 0
    biases: bool = False
    eps: float = 1e-5
    n_ctx: int = 512
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    split_experts: bool = False  # per-expert 2-D tensors (older Mixtral files), not ffn_*_exps
    yarn: tuple = ()             # (factor, original context, yarn_log_multiplier or 0)
    extra: tuple = ()            # extra (key under the arch, value) metadata: int -> u32, float -> f32
    nextn: int = 0               # multi-token-prediction layers appended after n_layer (counted
                                 # in block_count, as the converter writes them; weights_edit adds them)
    # deepseek2 (head_dim = qk_nope + rope dims)
    q_lora: int = 0
    kv_lora: int = 0
    v_head: int = 0
    kv_b_legacy: bool = False    # attn_kv_b instead of attn_k_b / attn_v_b
    dense_lead: int = 0
    n_shared: int = 0
    sigmoid: bool = False
    groups: tuple = ()           # (group count, groups used)
    w_norm: bool = False
    w_scale: float = 0.0
    write_ff_exp: bool = True    # write expert_feed_forward_length (Mixtral files do not)


SPECS = [
    Spec("llama", "llama", 101, 256, 2, 8, 2, 32, 512, tied=False),
    Spec("llama_swa", "llama", 102, 128, 3, 8, 2, 16, 256, tied=True, window=12),
    Spec("llama_rope", "llama", 103, 128, 2, 4, 4, 32, 256, tied=False, rope_base=50000.0,
         rope_dims=16, rope_linear=4.0),
    Spec("qwen2", "qwen2", 104, 128, 3, 8, 2, 16, 384, tied=True, rope_base=1e6, biases=True,
         eps=1e-6),
    Spec("qwen3", "qwen3", 105, 128, 3, 8, 2, 32, 256, tied=True, rope_base=1e6, eps=1e-6),
    Spec("gemma3", "gemma3", 106, 256, 7, 8, 2, 32, 512, tied=True, rope_base=1e6, window=10,
         eps=1e-6),
    Spec("qwen3moe", "qwen3moe", 107, 128, 3, 8, 2, 32, 192, tied=True, rope_base=1e6, eps=1e-6,
         n_expert=8, n_expert_used=2, n_ff_exp=64),
    Spec("qwen2moe", "qwen2moe", 108, 128, 2, 8, 2, 16, 160, tied=False, rope_base=1e6, biases=True,
         eps=1e-6, n_expert=6, n_expert_used=4, n_ff_exp=48, n_ff_shexp=96),
    Spec("deepseek2", "deepseek2", 110, 128, 3, 4, 1, 40, 160, tied=False, rope_dims=16,
         eps=1e-6, n_expert=8, n_expert_used=3, n_ff_exp=32, yarn=(4.0, 4096, 0.0707), q_lora=48,
         kv_lora=48, v_head=20, dense_lead=1, n_shared=1, sigmoid=True, groups=(4, 2), w_norm=True,
         w_scale=2.5),
    Spec("deepseek2_lite", "deepseek2", 111, 128, 2, 4, 4, 40, 160, tied=False, rope_dims=16,
         eps=1e-6, n_expert=6, n_expert_used=2, n_ff_exp=32, kv_lora=48, v_head=20, kv_b_legacy=True,
         dense_lead=1, n_shared=2),
    Spec("glm4moe", "glm4moe", 112, 128, 3, 4, 2, 48, 160, tied=False, rope_base=1e6, rope_dims=24,
         biases=True, eps=1e-5, n_expert=8, n_expert_used=3, n_ff_exp=32, n_ff_shexp=32, dense_lead=1,
         n_shared=1, w_norm=True, w_scale=2.5, nextn=1),
    Spec("gpt-oss", "gpt-oss", 113, 128, 4, 8, 2, 16, 64, tied=False, rope_base=150000.0, biases=True,
         window=10, n_expert=4, n_expert_used=2, n_ff_exp=64, yarn=(8.0, 32, 0.0)),
    Spec("llama_yarn", "llama", 103, 128, 2, 4, 4, 32, 256, tied=False, rope_base=50000.0,
         rope_dims=16, yarn=(4.0, 32, 0.0)),
    # Long context: a context of 4096 from an original 1024, by YaRN and by linear scaling
    # (test_synthetic.py's long-position tests read positions up to 4095).
    Spec("llama_yarn_4k", "llama", 110, 128, 2, 4, 2, 32, 256, tied=False, rope_base=10000.0,
         yarn=(4.0, 1024, 0.0), n_ctx=4096),
    Spec("llama_rope_4k", "llama", 111, 128, 2, 4, 2, 32, 256, tied=False, rope_base=10000.0,
         rope_linear=4.0, n_ctx=4096),
    Spec("mixtral", "llama", 109, 128, 2, 8, 2, 16, 96, tied=False, rope_base=1e6, n_expert=4,
         n_expert_used=2, n_ff_exp=96, write_ff_exp=False),
    Spec("mixtral_split", "llama", 109, 128, 2, 8, 2, 16, 96, tied=False, rope_base=1e6, n_expert=4,
         n_expert_used=2, n_ff_exp=96, write_ff_exp=False, split_experts=True),
]

LLAMA_TYPES = ["f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"]

GEMMA_Q4_K_M = {
    "token_embd": "q8_0", "attn_q": "q5_0", "attn_k": "q5_0", "attn_v": "q8_0",
    "attn_output": "q4_k", "ffn_gate": "q5_0", "ffn_up": "q5_0", "ffn_down": "q6_k",
}


def make_weights(s: Spec) -> dict:
    """name -> float32 numpy array ([n_out, n_in] for matrices), in GGUF tensor order."""
    rng = np.random.default_rng(s.seed)
    w = {}

    def mat(n_out, n_in, gain=1.0):
        return (rng.standard_normal((n_out, n_in)) * (gain / np.sqrt(n_in))).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def vec(n, std):
        return (std * rng.standard_normal(n)).astype(np.float32)

    qd, kvd = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    # Gemma scales embeddings by sqrt(n_embd) and ties the output to them: a smaller table
    # keeps the "repeat the input token" term of the logits from dominating.
    gemma = s.arch == "gemma3"
    w["token_embd.weight"] = mat(N_VOCAB, s.n_embd, 0.5 if gemma else 2.0)
    if s.arch == "deepseek2":
        return _deepseek2_weights(s, w, mat, norm, vec)
    for il in range(s.n_layer):
        p = f"blk.{il}."
        w[p + "attn_norm.weight"] = norm(s.n_embd)
        w[p + "attn_q.weight"] = mat(qd, s.n_embd, 1.5)
        w[p + "attn_k.weight"] = mat(kvd, s.n_embd, 1.5)
        w[p + "attn_v.weight"] = mat(kvd, s.n_embd)
        if s.biases:
            w[p + "attn_q.bias"] = vec(qd, 0.2)
            w[p + "attn_k.bias"] = vec(kvd, 0.2)
            w[p + "attn_v.bias"] = vec(kvd, 0.2)
        if s.arch in ("qwen3", "gemma3", "qwen3moe", "glm4moe"):
            w[p + "attn_q_norm.weight"] = norm(s.head_dim)
            w[p + "attn_k_norm.weight"] = norm(s.head_dim)
        w[p + "attn_output.weight"] = mat(s.n_embd, qd)
        if s.arch == "gpt-oss":
            w[p + "attn_output.bias"] = vec(s.n_embd, 0.2)
            sinks = vec(s.n_head, 1.0)
            sinks[0] = 6.0  # above most of its scores: a large share of the softmax
            w[p + "attn_sinks.weight"] = sinks
        if s.arch == "gemma3":
            w[p + "post_attention_norm.weight"] = norm(s.n_embd)
        w[p + ("post_attention_norm.weight" if s.arch in ("glm4moe", "gpt-oss") else "ffn_norm.weight")] = norm(s.n_embd)
        if s.n_expert and il >= s.dense_lead:
            router = mat(s.n_expert, s.n_embd, 3.0)
            router[-1] = router[-2]  # exact ties between the last two experts
            w[p + "ffn_gate_inp.weight"] = router
            if s.arch == "gpt-oss":
                w[p + "ffn_gate_inp.bias"] = vec(s.n_expert, 0.5)
            if s.arch == "glm4moe":
                bias = vec(s.n_expert, 0.05)
                bias[-1] = bias[-2]
                w[p + "exp_probs_b.bias"] = bias
            big = 8.0 if s.arch == "gpt-oss" else 1.0  # gate / up beyond the SwiGLU clamp at 7
            gate = [mat(s.n_ff_exp, s.n_embd, big) for _ in range(s.n_expert)]
            up = [mat(s.n_ff_exp, s.n_embd, big) for _ in range(s.n_expert)]
            down = [mat(s.n_embd, s.n_ff_exp) for _ in range(s.n_expert)]
            if s.split_experts:
                for e in range(s.n_expert):
                    w[p + f"ffn_gate.{e}.weight"] = gate[e]
                    w[p + f"ffn_down.{e}.weight"] = down[e]
                    w[p + f"ffn_up.{e}.weight"] = up[e]
            else:
                w[p + "ffn_gate_exps.weight"] = np.stack(gate)
                w[p + "ffn_up_exps.weight"] = np.stack(up)
                w[p + "ffn_down_exps.weight"] = np.stack(down) / big
            if s.arch == "gpt-oss":
                w[p + "ffn_gate_exps.bias"] = np.stack([vec(s.n_ff_exp, 1.0) for _ in range(s.n_expert)])
                w[p + "ffn_up_exps.bias"] = np.stack([vec(s.n_ff_exp, 1.0) for _ in range(s.n_expert)])
                w[p + "ffn_down_exps.bias"] = np.stack([vec(s.n_embd, 0.2) for _ in range(s.n_expert)])
            if s.n_ff_shexp:
                if s.arch == "qwen2moe":
                    w[p + "ffn_gate_inp_shexp.weight"] = vec(s.n_embd, 2.0 / np.sqrt(s.n_embd))
                w[p + "ffn_gate_shexp.weight"] = mat(s.n_ff_shexp, s.n_embd)
                w[p + "ffn_up_shexp.weight"] = mat(s.n_ff_shexp, s.n_embd)
                w[p + "ffn_down_shexp.weight"] = mat(s.n_embd, s.n_ff_shexp)
        else:
            w[p + "ffn_gate.weight"] = mat(s.n_ff, s.n_embd)
            w[p + "ffn_up.weight"] = mat(s.n_ff, s.n_embd)
            w[p + "ffn_down.weight"] = mat(s.n_embd, s.n_ff)
        if s.arch == "gemma3":
            w[p + "post_ffw_norm.weight"] = norm(s.n_embd)
    for il in range(s.n_layer, s.n_layer + s.nextn):  # a multi-token-prediction layer (never run)
        p = f"blk.{il}."
        w[p + "nextn.eh_proj.weight"] = mat(s.n_embd, 2 * s.n_embd)
        w[p + "nextn.enorm.weight"] = norm(s.n_embd)
        w[p + "nextn.hnorm.weight"] = norm(s.n_embd)
        w[p + "attn_norm.weight"] = norm(s.n_embd)
    w["output_norm.weight"] = norm(s.n_embd) * (3.0 if gemma else 1.0)
    if not s.tied:
        w["output.weight"] = mat(N_VOCAB, s.n_embd, 2.0)
    return w


def _deepseek2_weights(s: Spec, w: dict, mat, norm, vec) -> dict:
    H, R, D, V = s.n_head, s.kv_lora, s.rope_dims, s.v_head
    N = s.head_dim - D
    for il in range(s.n_layer):
        p = f"blk.{il}."
        w[p + "attn_norm.weight"] = norm(s.n_embd)
        if s.q_lora:
            w[p + "attn_q_a.weight"] = mat(s.q_lora, s.n_embd)
            w[p + "attn_q_a_norm.weight"] = norm(s.q_lora)
            w[p + "attn_q_b.weight"] = mat(H * (N + D), s.q_lora, 1.5)
        else:
            w[p + "attn_q.weight"] = mat(H * (N + D), s.n_embd, 1.5)
        w[p + "attn_kv_a_mqa.weight"] = mat(R + D, s.n_embd, 1.5)
        w[p + "attn_kv_a_norm.weight"] = norm(R)
        k_b = np.stack([mat(N, R, 1.5).T for _ in range(H)])  # [H, R, N]: head h's key rows, transposed
        v_b = np.stack([mat(V, R) for _ in range(H)])        # [H, V, R]
        if s.kv_b_legacy:  # per head N key rows then V value rows
            w[p + "attn_kv_b.weight"] = np.concatenate(
                [np.concatenate([k_b[h].T, v_b[h]]) for h in range(H)]).astype(np.float32)
        else:
            w[p + "attn_k_b.weight"] = np.ascontiguousarray(k_b, dtype=np.float32)
            w[p + "attn_v_b.weight"] = v_b
        w[p + "attn_output.weight"] = mat(s.n_embd, H * V)
        w[p + "ffn_norm.weight"] = norm(s.n_embd)
        if il < s.dense_lead:
            w[p + "ffn_gate.weight"] = mat(s.n_ff, s.n_embd)
            w[p + "ffn_up.weight"] = mat(s.n_ff, s.n_embd)
            w[p + "ffn_down.weight"] = mat(s.n_embd, s.n_ff)
            continue
        router = mat(s.n_expert, s.n_embd, 3.0)
        router[-1] = router[-2]
        w[p + "ffn_gate_inp.weight"] = router
        if s.sigmoid:
            bias = vec(s.n_expert, 0.05)
            bias[-1] = bias[-2]
            w[p + "exp_probs_b.bias"] = bias
        w[p + "ffn_gate_exps.weight"] = np.stack([mat(s.n_ff_exp, s.n_embd) for _ in range(s.n_expert)])
        w[p + "ffn_up_exps.weight"] = np.stack([mat(s.n_ff_exp, s.n_embd) for _ in range(s.n_expert)])
        w[p + "ffn_down_exps.weight"] = np.stack([mat(s.n_embd, s.n_ff_exp) for _ in range(s.n_expert)])
        fs = s.n_ff_exp * s.n_shared
        w[p + "ffn_gate_shexp.weight"] = mat(fs, s.n_embd)
        w[p + "ffn_up_shexp.weight"] = mat(fs, s.n_embd)
        w[p + "ffn_down_shexp.weight"] = mat(s.n_embd, fs)
    w["output_norm.weight"] = norm(s.n_embd)
    w["output.weight"] = mat(N_VOCAB, s.n_embd, 2.0)
    return w


QTYPES = {
    "f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0,
    "q4_1": QT.Q4_1, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1, "q4_k": QT.Q4_K, "q5_k": QT.Q5_K,
    "q6_k": QT.Q6_K,
}
K_ENCODERS = {"q4_k": kquants.quantize_q4_k, "q5_k": kquants.quantize_q5_k,
              "q6_k": kquants.quantize_q6_k}


def encode(arr: np.ndarray, tname: str):
    """(data, raw_dtype) for GGUFWriter.add_tensor of a float32 array stored as tname."""
    if tname == "f32":
        return arr, None
    if tname == "f16":
        return arr.astype(np.float16), None
    if tname in K_ENCODERS:
        return K_ENCODERS[tname](arr), QTYPES[tname]
    return quantize(arr, QTYPES[tname]), QTYPES[tname]


def _routing_metadata(wr, s: Spec) -> None:
    """deepseek2 / glm4moe: leading dense layers, shared experts, weight scale and norm."""
    wr.add_leading_dense_block_count(s.dense_lead)
    wr.add_expert_shared_count(s.n_shared)
    if s.w_scale:
        wr.add_expert_weights_scale(s.w_scale)
    if s.w_norm:
        wr.add_expert_weights_norm(True)


def _deepseek2_metadata(wr, s: Spec) -> None:
    R, D = s.kv_lora, s.rope_dims
    if s.q_lora:
        wr.add_q_lora_rank(s.q_lora)
    wr.add_kv_lora_rank(R)
    if s.kv_b_legacy:  # per-head sizes as key / value length
        wr.add_key_length(s.head_dim)
        wr.add_value_length(s.v_head)
    else:  # the cached latent row as key / value length, per-head sizes as *_mla
        wr.add_key_length(R + D)
        wr.add_value_length(R)
        wr.add_key_length_mla(s.head_dim)
        wr.add_value_length_mla(s.v_head)
    _routing_metadata(wr, s)
    if s.sigmoid:
        wr.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)
    if s.groups:
        wr.add_expert_group_count(s.groups[0])
        wr.add_expert_group_used_count(s.groups[1])


def write_model(path: str, s: Spec, weights: dict, type_of) -> None:
    """Writes one GGUF; type_of(tensor_name) gives the storage type name of 2-D weights."""
    tokens, scores, types = build_vocab()
    tmp = path + ".tmp"
    wr = GGUFWriter(tmp, s.arch)
    a = s.arch
    wr.add_name(f"triad-synthetic-{s.name}")
    wr.add_context_length(s.n_ctx)
    wr.add_embedding_length(s.n_embd)
    wr.add_block_count(s.n_layer + s.nextn)
    if s.nextn:
        wr.add_uint32(f"{a}.nextn_predict_layers", s.nextn)
    wr.add_feed_forward_length(s.n_ff)
    wr.add_head_count(s.n_head)
    wr.add_head_count_kv(s.n_head_kv)
    wr.add_layer_norm_rms_eps(s.eps)
    wr.add_rope_freq_base(s.rope_base)
    wr.add_rope_dimension_count(s.rope_dims or s.head_dim)
    if a == "glm4moe":  # routing keys as deepseek2's, minus gating (sigmoid by default)
        _routing_metadata(wr, s)
    if s.n_expert:
        wr.add_expert_count(s.n_expert)
        wr.add_expert_used_count(s.n_expert_used)
        if s.write_ff_exp:
            wr.add_expert_feed_forward_length(s.n_ff_exp)
        if s.n_ff_shexp and a == "qwen2moe":
            wr.add_expert_shared_feed_forward_length(s.n_ff_shexp)
    if a == "deepseek2":
        _deepseek2_metadata(wr, s)
    elif s.head_dim != s.n_embd // s.n_head or a in ("qwen3", "gemma3", "qwen3moe", "glm4moe"):
        wr.add_key_length(s.head_dim)
        wr.add_value_length(s.head_dim)
    if s.yarn:
        wr.add_rope_scaling_type(RopeScalingType.YARN)
        wr.add_rope_scaling_factor(s.yarn[0])
        wr.add_rope_scaling_orig_ctx_len(s.yarn[1])
        if s.yarn[2]:
            wr.add_rope_scaling_yarn_log_mul(s.yarn[2])
    if s.rope_linear:
        wr.add_rope_scaling_type(RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(s.rope_linear)
    if s.window:
        wr.add_sliding_window(s.window)
    for key, v in s.extra:  # last: GGUFWriter keeps the last value of a repeated key
        (wr.add_float32 if isinstance(v, float) else wr.add_uint32)(f"{a}.{key}", v)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)
    wr.add_quantization_version(2)
    for name, arr in weights.items():
        tname = type_of(name) if arr.ndim >= 2 else "f32"
        data, raw = encode(arr, tname)
        wr.add_tensor(name, data, raw_dtype=raw)
    assert a == wr.arch
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(tmp, path)


def write_all(out_dir: str) -> list:
    """Writes every synthetic model into out_dir; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    weights_of = {}
    for s in SPECS:
        weights_of[s.name] = make_weights(s)
        p = os.path.join(out_dir, s.name + ".gguf")
        write_model(p, s, weights_of[s.name], lambda n: "f32")
        written.append(p)
    base = next(s for s in SPECS if s.name == "llama")
    for t in LLAMA_TYPES:
        p = os.path.join(out_dir, f"llama_{t}.gguf")
        write_model(p, replace(base, name=f"llama_{t}"), weights_of["llama"],
                    lambda n, t=t: t)
        written.append(p)
    gem = next(s for s in SPECS if s.name == "gemma3")

    def gemma_type(n):
        key = n.split(".")[-2]
        return GEMMA_Q4_K_M.get(key, "f32")

    p = os.path.join(out_dir, "gemma3_q4_k_m.gguf")
    write_model(p, replace(gem, name="gemma3_q4_k_m"), weights_of["gemma3"], gemma_type)
    written.append(p)
    moe = next(s for s in SPECS if s.name == "qwen3moe")
    p = os.path.join(out_dir, "qwen3moe_q5_0.gguf")
    write_model(p, replace(moe, name="qwen3moe_q5_0"), weights_of["qwen3moe"],
                lambda n: "f32" if "ffn_gate_inp" in n else "q5_0")
    written.append(p)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        sys.exit(2)
    for path in write_all(sys.argv[1]):
        print(path)

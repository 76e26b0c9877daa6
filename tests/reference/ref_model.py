"""Independent numpy reference forward pass for GGUF decoder-only LLMs.

What it is: a slow, straightforward float64 implementation of the llama, qwen2, qwen3 and
gemma3 architectures as published (Hugging Face transformers semantics, as converted to GGUF
by llama.cpp's convert script), used as ground truth for Triad's golden tests. It is written
from the architectures' definitions only, never from Triad's C++ code.

Properties:
  * Any weight type PyPI gguf can dequantize (F32, F16, BF16, Q4_0..Q8_0, K-quants ...);
    weights are kept as float32 (the exact dequantized values) and every product, norm,
    softmax and residual is computed in float64.
  * GGUF dims are reversed vs numpy: a GGUF tensor of shape [n_in, n_out] is a numpy array
    [n_out, n_in] and y = W @ x.
  * RoPE: "normal" layout rotates pairs (2i, 2i+1) (llama: the converter permutes the HF q/k
    weights so GGUF expects interleaved pairs), "neox" rotates pairs (i, i + rot/2) (qwen2,
    qwen3, gemma3). Only the first `rope_dims` dims of a head are rotated.
  * Sliding window: a query at position p sees keys at k with k <= p and p - k < window.
  * Optional emulation of the activation rounding an engine applies before multiplying by
    low-precision weights (act_quant=True): Q8 blocks of 32 for quantized weights, bf16 for
    BF16 weights, as Triad documents in src/kernels/act_quant.h (a numerical contract, not
    its code). Used to size and tighten the tolerances of quantized-model tests.

Thread-safety: a RefModel is immutable after construction except for KvCache objects the caller
creates; distinct caches may be used from distinct threads, one cache from one thread only.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field

# Multi-threaded OpenBLAS is many times slower than one thread for these small products on a
# busy 2-core machine; takes effect only if numpy is not imported yet.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

# ----------------------------------------------------------------------------------------------
# Metadata and weights
# ----------------------------------------------------------------------------------------------

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen2moe", "deepseek2", "glm4moe", "gpt-oss")


def read_metadata(reader: GGUFReader) -> dict:
    """All key/value fields of a GGUF file as plain Python values (arrays as lists)."""
    out = {}
    for key, fld in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        out[key] = fld.contents()
    return out


def tensor_to_numpy(t) -> np.ndarray:
    """Dequantizes one ReaderTensor to float32 with numpy (reversed-GGUF) shape."""
    shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    qtype = GGMLQuantizationType(int(t.tensor_type))
    if qtype == GGMLQuantizationType.F32:
        arr = np.asarray(t.data, dtype=np.float32)
    elif qtype == GGMLQuantizationType.F16:
        arr = np.asarray(t.data, dtype=np.float16).astype(np.float32)
    elif qtype == GGMLQuantizationType.F64:
        arr = np.asarray(t.data, dtype=np.float64).astype(np.float32)
    else:
        arr = dequantize(np.asarray(t.data), qtype).astype(np.float32, copy=False)
    return np.ascontiguousarray(arr.reshape(shape))


@dataclass(frozen=True)
class RefConfig:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int            # per-head size of q and k (key_length)
    head_dim_v: int          # per-head size of v (value_length)
    n_ff: int
    eps: float
    rope_dims: int
    rope_layout: str         # "normal" or "neox"
    rope_base: float         # global layers
    rope_base_local: float   # sliding-window layers (gemma3: 10000)
    rope_linear_factor: float  # positions are divided by this on global layers (1 = none)
    sliding_window: int      # 0 = none
    local_layers: tuple = field(default_factory=tuple)  # per layer: True if sliding-window
    attn_scale: float = 0.0
    embd_scale: float = 1.0
    gelu_ffn: bool = False   # gemma: gelu_tanh(gate) * up; else silu(gate) * up
    post_norms: bool = False  # gemma3 post_attention_norm / post_ffw_norm
    bos_id: int = -1
    eos_id: int = -1
    # Mixture of experts (Qwen3MoeSparseMoeBlock / Qwen2MoeSparseMoeBlock): router softmax over
    # n_expert, top n_expert_used, weights renormalized when expert_norm (norm_topk_prob); qwen2moe
    # adds a shared expert of n_ff_shexp gated by sigmoid(shared_expert_gate(h)).
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    expert_norm: bool = False
    n_ff_shexp: int = 0
    shexp_gated: bool = False  # qwen2moe: sigmoid(ffn_gate_inp_shexp . h) scales the shared expert
    # DeepSeek (DeepseekV2MoE / DeepseekV3MoE): the first dense_lead layers are dense; scores
    # by sigmoid instead of softmax; experts chosen by score + exp_probs_b within the n_group_used
    # groups (of n_groups) with the highest top-2 sums; weights scaled by w_scale.
    dense_lead: int = 0
    gating_sigmoid: bool = False
    n_groups: int = 0
    n_group_used: int = 0
    w_scale: float = 1.0
    # Multi-head latent attention (DeepseekV2Attention, computed as written there: per-head
    # keys and values decompressed from the latent, no absorption).
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope: int = 0
    yarn: tuple | None = None  # (factor, orig_ctx, cos/sin scale) for rope()
    # gpt-oss (GptOssMLP / GptOssExperts): router with bias, top-k of the logits, softmax over
    # those k; experts with biases and the clamped SwiGLU; attention sinks per head.
    oai_moe: bool = False
    ffn_norm: str = "ffn_norm"  # the pre-FFN norm (Glm4MoeDecoderLayer's post_attention_layernorm
                                # is stored as post_attention_norm)


def _get(md: dict, key: str, default=None, required: bool = False):
    if key in md:
        return md[key]
    if required:
        raise ValueError(f"GGUF metadata key {key!r} missing")
    return default


def config_from_metadata(md: dict, tensors: dict) -> RefConfig:
    arch = _get(md, "general.architecture", required=True)
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"unsupported architecture {arch!r}")
    a = arch
    n_embd = int(_get(md, f"{a}.embedding_length", required=True))
    # block_count counts the multi-token-prediction layers the converter appends (DeepSeek-V3,
    # GLM-4.5); they take no part in the forward pass.
    n_layer = int(_get(md, f"{a}.block_count", required=True)) - int(_get(md, f"{a}.nextn_predict_layers", 0))
    n_head = int(_get(md, f"{a}.attention.head_count", required=True))
    n_head_kv = int(_get(md, f"{a}.attention.head_count_kv", n_head))
    head_dim = int(_get(md, f"{a}.attention.key_length", n_embd // n_head))
    head_dim_v = int(_get(md, f"{a}.attention.value_length", head_dim))
    n_ff = int(_get(md, f"{a}.feed_forward_length", required=True))
    eps = float(_get(md, f"{a}.attention.layer_norm_rms_epsilon", 1e-5))
    rope_dims = int(_get(md, f"{a}.rope.dimension_count", head_dim))
    rope_base = float(_get(md, f"{a}.rope.freq_base", 10000.0))
    factor = 1.0
    stype = _get(md, f"{a}.rope.scaling.type", None)
    if stype is not None and stype not in ("none", "linear", "yarn"):
        raise ValueError(f"rope scaling type {stype!r} not supported by the reference")
    yarn = None
    if stype == "yarn" and arch != "deepseek2":
        # HF _compute_yarn_parameters: attention_factor = 0.1 ln(factor) + 1 on cos and sin.
        yf = float(_get(md, f"{a}.rope.scaling.factor", 1.0))
        if yf > 1:
            yarn = (yf, int(_get(md, f"{a}.rope.scaling.original_context_length",
                                 _get(md, f"{a}.context_length", 4096))), 0.1 * math.log(yf) + 1.0)
    if stype == "linear":
        factor = float(_get(md, f"{a}.rope.scaling.factor", 1.0))
    elif f"{a}.rope.scale_linear" in md:  # older key
        factor = float(md[f"{a}.rope.scale_linear"])
    if factor <= 0:
        factor = 1.0
    window = int(_get(md, f"{a}.attention.sliding_window", 0) or 0)
    n_vocab = tensors["token_embd.weight"].shape[0]
    bos = int(_get(md, "tokenizer.ggml.bos_token_id", -1))
    eos = int(_get(md, "tokenizer.ggml.eos_token_id", -1))

    if arch == "gemma3":
        # Gemma 3: every 6th layer (il % 6 == 5) is global, the others are sliding-window.
        local = tuple(window > 0 and (il + 1) % 6 != 0 for il in range(n_layer))
        # HF query_pre_attn_scalar is head_dim for every size except 27B (62 layers), where
        # it is n_embd / n_head.
        qpas = (n_embd / n_head) if n_layer == 62 else head_dim
        return RefConfig(
            arch=arch, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
            n_head_kv=n_head_kv, head_dim=head_dim, head_dim_v=head_dim_v, n_ff=n_ff, eps=eps,
            rope_dims=rope_dims, rope_layout="neox", rope_base=rope_base,
            rope_base_local=float(_get(md, f"{a}.rope.freq_base_swa", 10000.0)),
            rope_linear_factor=factor, sliding_window=window, local_layers=local,
            attn_scale=1.0 / math.sqrt(qpas), embd_scale=math.sqrt(n_embd), gelu_ffn=True,
            post_norms=True, bos_id=bos, eos_id=eos)

    if arch == "deepseek2":
        return _deepseek2_config(md, a, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                                 n_ff=n_ff, eps=eps, rope_base=rope_base, bos=bos, eos=eos)
    local = tuple(window > 0 for _ in range(n_layer))
    rope_base_local = rope_base
    if arch == "gpt-oss":
        # layer_types: sliding_attention on even layers, full on odd ones.
        local = tuple(window > 0 and il % 2 == 0 for il in range(n_layer))
        rope_base_local = float(_get(md, f"{a}.rope.freq_base_swa", rope_base))
    moe = {}
    n_expert = int(_get(md, f"{a}.expert_count", 0))
    if arch == "gpt-oss":
        moe = dict(n_expert=int(_get(md, f"{a}.expert_count", required=True)),
                   n_expert_used=int(_get(md, f"{a}.expert_used_count", required=True)),
                   n_ff_exp=int(_get(md, f"{a}.expert_feed_forward_length", required=True)),
                   oai_moe=True, ffn_norm="post_attention_norm")
    elif arch == "glm4moe":
        # Glm4MoeMoE: sigmoid router with e_score_correction_bias (exp_probs_b), n_group groups,
        # top_k, norm_topk_prob, routed_scaling_factor, n_shared_experts ungated; the first
        # first_k_dense_replace layers dense. (No expert_gating_func key means sigmoid, as
        # llama.cpp assumes for this architecture.)
        n_ff_exp = int(_get(md, f"{a}.expert_feed_forward_length", required=True))
        moe = dict(n_expert=int(_get(md, f"{a}.expert_count", required=True)),
                   n_expert_used=int(_get(md, f"{a}.expert_used_count", required=True)),
                   n_ff_exp=n_ff_exp, expert_norm=bool(_get(md, f"{a}.expert_weights_norm", False)),
                   n_ff_shexp=n_ff_exp * int(_get(md, f"{a}.expert_shared_count", 0)),
                   dense_lead=int(_get(md, f"{a}.leading_dense_block_count", 0)),
                   gating_sigmoid=int(_get(md, f"{a}.expert_gating_func", 2)) == 2,
                   n_groups=int(_get(md, f"{a}.expert_group_count", 0)),
                   n_group_used=int(_get(md, f"{a}.expert_group_used_count", 0)),
                   w_scale=float(_get(md, f"{a}.expert_weights_scale", 1.0)) or 1.0,
                   ffn_norm="post_attention_norm")
    elif arch in ("qwen3moe", "qwen2moe") or (arch == "llama" and n_expert > 0):
        # Mixtral (llama with experts): HF MixtralSparseMoeBlock takes softmax over the router
        # logits, keeps the top k and divides by their sum; its experts are intermediate_size wide,
        # which the GGUF calls feed_forward_length.
        moe = dict(n_expert=int(_get(md, f"{a}.expert_count", required=True)),
                   n_expert_used=int(_get(md, f"{a}.expert_used_count", required=True)),
                   n_ff_exp=int(_get(md, f"{a}.expert_feed_forward_length",
                                     n_ff if arch == "llama" else None, required=arch != "llama")),
                   expert_norm=arch in ("qwen3moe", "llama"))
        if arch == "qwen2moe":
            moe["n_ff_shexp"] = int(_get(md, f"{a}.expert_shared_feed_forward_length", n_ff))
            moe["shexp_gated"] = True
    return RefConfig(
        arch=arch, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
        n_head_kv=n_head_kv, head_dim=head_dim, head_dim_v=head_dim_v, n_ff=n_ff, eps=eps,
        rope_dims=rope_dims, rope_layout="normal" if arch == "llama" else "neox",
        rope_base=rope_base, rope_base_local=rope_base_local, rope_linear_factor=factor,
        sliding_window=window, local_layers=local, attn_scale=1.0 / math.sqrt(head_dim),
        bos_id=bos, eos_id=eos, yarn=yarn, **moe)


def _deepseek2_config(md: dict, a: str, **kw) -> RefConfig:
    """DeepSeek-V2/V3 from the GGUF keys llama.cpp's converter writes (HF config names in
    comments)."""
    kv_rank = int(_get(md, f"{a}.attention.kv_lora_rank", required=True))        # kv_lora_rank
    q_rank = int(_get(md, f"{a}.attention.q_lora_rank", 0))                      # q_lora_rank
    rope_dims = int(_get(md, f"{a}.rope.dimension_count", required=True))        # qk_rope_head_dim
    if f"{a}.attention.key_length_mla" in md:  # split attn_k_b / attn_v_b files
        k_head = int(md[f"{a}.attention.key_length_mla"])
        v_head = int(md[f"{a}.attention.value_length_mla"])
    else:
        k_head = int(_get(md, f"{a}.attention.key_length", required=True))
        v_head = int(_get(md, f"{a}.attention.value_length", required=True))
    softmax_scale = k_head ** -0.5
    yarn = None
    if _get(md, f"{a}.rope.scaling.type", "none") == "yarn":
        factor = float(md[f"{a}.rope.scaling.factor"])
        orig = int(_get(md, f"{a}.rope.scaling.original_context_length",
                        _get(md, f"{a}.context_length", 4096)))
        # GGUF yarn_log_multiplier = 0.1 * mscale_all_dim; HF's cos/sin scale is
        # get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) = 1 for the released
        # models (mscale == mscale_all_dim), and the softmax scale gains get_mscale(factor,
        # mscale_all_dim)^2.
        log_mul = float(_get(md, f"{a}.rope.scaling.yarn_log_multiplier", 0.0))
        if factor > 1 and log_mul > 0:
            yarn = (factor, orig, 1.0)
            m = 1.0 + log_mul * math.log(factor)
            softmax_scale *= m * m
        elif factor > 1:
            # Without the multiplier HF would scale only cos/sin by 1 + 0.1 ln(factor); llama.cpp
            # (whose converter wrote the file) also squares it into the softmax scale. Triad
            # follows llama.cpp.
            m = 1.0 + 0.1 * math.log(factor)
            yarn = (factor, orig, m)
            softmax_scale *= m * m
    n_expert = int(_get(md, f"{a}.expert_count", required=True))
    n_ff_exp = int(_get(md, f"{a}.expert_feed_forward_length", required=True))   # moe_intermediate_size
    return RefConfig(
        arch="deepseek2", n_vocab=kw["n_vocab"], n_embd=kw["n_embd"], n_layer=kw["n_layer"],
        n_head=kw["n_head"], n_head_kv=kw["n_head"], head_dim=k_head, head_dim_v=v_head, n_ff=kw["n_ff"],
        eps=kw["eps"], rope_dims=rope_dims, rope_layout="normal", rope_base=kw["rope_base"],
        rope_base_local=kw["rope_base"], rope_linear_factor=1.0, sliding_window=0,
        local_layers=tuple(False for _ in range(kw["n_layer"])), attn_scale=softmax_scale,
        bos_id=kw["bos"], eos_id=kw["eos"],
        n_expert=n_expert, n_expert_used=int(_get(md, f"{a}.expert_used_count", required=True)),
        n_ff_exp=n_ff_exp, expert_norm=bool(_get(md, f"{a}.expert_weights_norm", False)),
        n_ff_shexp=n_ff_exp * int(_get(md, f"{a}.expert_shared_count", 0)),   # n_shared_experts
        dense_lead=int(_get(md, f"{a}.leading_dense_block_count", 0)),         # first_k_dense_replace
        gating_sigmoid=int(_get(md, f"{a}.expert_gating_func", 1)) == 2,       # scoring_func
        n_groups=int(_get(md, f"{a}.expert_group_count", 0)),                  # n_group
        n_group_used=int(_get(md, f"{a}.expert_group_used_count", 0)),         # topk_group
        w_scale=float(_get(md, f"{a}.expert_weights_scale", 1.0)) or 1.0,      # routed_scaling_factor
        q_lora_rank=q_rank, kv_lora_rank=kv_rank, qk_nope=k_head - rope_dims, yarn=yarn)


# ----------------------------------------------------------------------------------------------
# Building blocks (pure functions, float64)
# ----------------------------------------------------------------------------------------------

def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    x = np.asarray(x, dtype=np.float64)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * np.asarray(w, dtype=np.float64)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def yarn_inv_freq(rot_dims: int, base: float, factor: float, orig_ctx: int, beta_fast: float = 32.0,
                  beta_slow: float = 1.0) -> np.ndarray:
    """YaRN's per-pair inverse frequencies (HF _compute_yarn_parameters /
    DeepseekV2YarnRotaryEmbedding): pairs that turn more than beta_fast times over orig_ctx keep
    their frequency, pairs that turn fewer than beta_slow times are divided by factor, and a
    linear ramp between the two correction dims blends the rest."""
    def corr_dim(turns):
        return rot_dims * math.log(orig_ctx / (turns * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), rot_dims - 1)
    if low == high:
        high += 0.001
    half = rot_dims // 2
    extra = base ** (-2.0 * np.arange(half, dtype=np.float64) / rot_dims)
    inter = extra / factor
    ramp = np.clip((np.arange(half, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    keep = 1.0 - ramp  # 1: extrapolate (original frequency), 0: interpolate
    return inter * (1.0 - keep) + extra * keep


def rope(x: np.ndarray, positions: np.ndarray, rot_dims: int, base: float, layout: str,
         linear_factor: float = 1.0, yarn: tuple | None = None) -> np.ndarray:
    """Rotary embedding of x [T, H, D] at integer positions [T].

    Pair i (i < rot_dims/2) is rotated by angle (pos / linear_factor) * base^(-2i/rot_dims);
    with yarn = (factor, orig_ctx, cos_sin_scale) by pos * yarn_inv_freq(...)[i] instead, and
    cos / sin multiplied by cos_sin_scale.
    layout "normal": pair = dims (2i, 2i+1); "neox": pair = dims (i, i + rot_dims/2).
    Dims >= rot_dims pass through unchanged.
    """
    x = np.array(x, dtype=np.float64, copy=True)
    if rot_dims % 2 != 0 or rot_dims > x.shape[-1]:
        raise ValueError(f"bad rope dims {rot_dims} for head dim {x.shape[-1]}")
    half = rot_dims // 2
    mscale = 1.0
    if yarn is not None:
        factor, orig_ctx, mscale = yarn
        inv_freq = yarn_inv_freq(rot_dims, base, factor, orig_ctx)
        pos = np.asarray(positions, dtype=np.float64)
    else:
        inv_freq = base ** (-2.0 * np.arange(half, dtype=np.float64) / rot_dims)
        pos = np.asarray(positions, dtype=np.float64) / linear_factor
    ang = pos[:, None] * inv_freq[None, :]          # [T, half]
    cos = np.cos(ang)[:, None, :] * mscale          # [T, 1, half]
    sin = np.sin(ang)[:, None, :] * mscale
    if layout == "normal":
        a = x[..., 0:rot_dims:2].copy()
        b = x[..., 1:rot_dims:2].copy()
        x[..., 0:rot_dims:2] = a * cos - b * sin
        x[..., 1:rot_dims:2] = a * sin + b * cos
    elif layout == "neox":
        a = x[..., 0:half].copy()
        b = x[..., half:rot_dims].copy()
        x[..., 0:half] = a * cos - b * sin
        x[..., half:rot_dims] = a * sin + b * cos
    else:
        raise ValueError(f"unknown rope layout {layout!r}")
    return x


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray,
              scale: float, window: int = 0, sinks: np.ndarray | None = None) -> np.ndarray:
    """Causal multi-head attention with grouped KV heads.

    q [T, Hq, D], k [S, Hkv, D], v [S, Hkv, Dv]; query head h uses kv head h // (Hq / Hkv).
    Key j is visible to query i iff k_pos[j] <= q_pos[i] and (window == 0 or
    q_pos[i] - k_pos[j] < window). Returns [T, Hq, Dv].
    """
    n_q, hq, _ = q.shape
    hkv = k.shape[1]
    if hq % hkv != 0:
        raise ValueError("n_head must be a multiple of n_head_kv")
    group = hq // hkv
    qp = np.asarray(q_pos)[:, None]
    kp = np.asarray(k_pos)[None, :]
    visible = kp <= qp
    if window > 0:
        visible &= (qp - kp) < window
    out = np.empty((n_q, hq, v.shape[2]), dtype=np.float64)
    for h in range(hq):
        kh = h // group
        s = (q[:, h, :] @ k[:, kh, :].T) * scale             # [T, S]
        s = np.where(visible, s, -np.inf)
        if sinks is not None:
            # GptOssAttention: the head's sink logit is one more softmax column, then dropped.
            s = np.concatenate([s, np.full((n_q, 1), float(sinks[h]))], axis=1)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        if sinks is not None:
            p = p[:, :-1]
        out[:, h, :] = p @ v[:, kh, :]
    return out


def rounding_tie_margin(x: np.ndarray) -> np.ndarray:
    """Per row of x (taken as float32), how close the per-row Q8 rounding of
    quantize_activations_q8(x, block=n) comes to a tie: the least |frac(|x| * 127 / amax) - 0.5|
    over the row, in code units (0.5 = far from every tie). An engine whose float32 activations
    differ from these by rounding noise can only round a code differently where this is tiny."""
    x32 = np.asarray(x, dtype=np.float32)
    amax = np.abs(x32).max(axis=-1, keepdims=True)
    safe = np.where(amax > 0, amax, np.float32(1))
    v = np.abs(x32 * (np.float32(127) / safe)).astype(np.float64)
    return np.abs(v - np.floor(v) - 0.5).min(axis=-1)


def quantize_activations_q8(x: np.ndarray, block: int = 32) -> np.ndarray:
    """Rounds rows of x the way Triad's kernels prepare activations for quantized weights
    (documented in src/kernels/act_quant.h): x is taken as float32; per block of `block`
    values, amax = max|x|, q = round_half_even(x * (127 / amax)) (float32 arithmetic),
    d = amax / 127; returns q * d as float64 (zeros where amax == 0)."""
    x32 = np.asarray(x, dtype=np.float32)
    n = x32.shape[-1]
    if n % block != 0:
        raise ValueError(f"activation row of {n} is not a multiple of {block}")
    xb = x32.reshape(x32.shape[:-1] + (n // block, block))
    amax = np.abs(xb).max(axis=-1, keepdims=True)
    safe = np.where(amax > 0, amax, np.float32(1))
    inv = np.float32(127) / safe
    q = np.clip(np.rint(xb * inv), -127, 127)
    q = np.where(amax > 0, q, np.float32(0))
    d = (safe / np.float32(127)).astype(np.float32)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x32.shape)


def round_activations_bf16(x: np.ndarray) -> np.ndarray:
    """x as float32, rounded to bfloat16 (round to nearest even, f32 subnormals flushed to zero,
    as Triad's kernels prepare activations for BF16 weights); returned as float64."""
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    tiny = np.abs(x32) < np.finfo(np.float32).tiny
    x32 = np.where(tiny, np.float32(0), x32)
    u = x32.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------

class KvCache:
    """Per-layer K (after RoPE) and V of every position seen so far."""

    def __init__(self, n_layer: int):
        self.k = [None] * n_layer
        self.v = [None] * n_layer
        self.n_past = 0


def online_quantize(w: np.ndarray, kind: str) -> np.ndarray:
    """A projection matrix [n_out, n_in] as Triad's --weight-type quantizes it at load time
    (src/quant/online.h), written from that definition: per output row, in float32,
    s = amax / 448 and codes = float8_e4m3fn(w / s) (rounding by PyPI ml_dtypes) for
    "fp8_e4m3"; s = amax / 127 and codes = round_half_even(clip(w / s, +-127)) for "int8".
    Rows with amax == 0 stay zero. Returns s * codes in float64."""
    import ml_dtypes  # only the online-quantization tests need it
    w32 = np.asarray(w, dtype=np.float32)
    amax = np.abs(w32).max(axis=1, keepdims=True)
    top = np.float32(448 if kind == "fp8_e4m3" else 127)
    s = (amax / top).astype(np.float32)
    safe = np.where(amax > 0, s, np.float32(1))
    r = (w32 / safe).astype(np.float32)
    if kind == "fp8_e4m3":
        codes = r.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    elif kind == "int8":
        codes = np.rint(np.clip(r, -127, 127)).astype(np.float64)
    else:
        raise ValueError(f"unknown online type {kind}")
    codes = np.where(amax > 0, codes, 0.0)
    return codes * s.astype(np.float64)


_PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


class RefModel:
    def __init__(self, path: str, act_quant: bool = False, online: str | None = None):
        """online: None, "fp8_e4m3" or "int8": the layers' projection matrices quantized as
        online_quantize does; "int8" also rounds their inputs per token (one Q8 scale per row of
        activations), as Triad's W8A8 kernels do."""
        reader = GGUFReader(path)
        self.metadata = read_metadata(reader)
        self.tensor_types = {}
        self.w = {}
        for t in reader.tensors:
            self.tensor_types[t.name] = GGMLQuantizationType(int(t.tensor_type)).name
            self.w[t.name] = tensor_to_numpy(t)
        del reader
        self._stack_split_experts()
        self.cfg = config_from_metadata(self.metadata, self.w)
        self.act_quant = act_quant
        self.online = online
        # online == "int8": per token row of the last forward, the least rounding_tie_margin of
        # any projection input (np.inf until a forward runs).
        self.tie_margin = None
        self.moe_trace = []  # MoE models: routing of the last forward (see _moe)
        self.online_names = set()
        if online:
            for name in list(self.w):
                parts = name.split(".")
                if len(parts) == 4 and parts[0] == "blk" and parts[2] in _PROJECTIONS and parts[3] == "weight" \
                        and self.tensor_types[name] in ("F32", "F16", "BF16"):
                    self.w[name] = online_quantize(self.w[name], online)
                    self.online_names.add(name)
        self._check_shapes()

    # -- weights ------------------------------------------------------------------------------
    def _stack_split_experts(self):
        """Older Mixtral files store expert e of layer il as blk.il.ffn_<kind>.e.weight (2-D);
        stack them into the blk.il.ffn_<kind>_exps.weight [n_expert, rows, cols] the rest uses."""
        split = {}
        for name in self.w:
            parts = name.split(".")
            if len(parts) == 5 and parts[0] == "blk" and parts[2] in ("ffn_gate", "ffn_up", "ffn_down") \
                    and parts[3].isdigit() and parts[4] == "weight":
                split.setdefault(f"blk.{parts[1]}.{parts[2]}_exps.weight", {})[int(parts[3])] = name
        for stacked, by_e in split.items():
            if sorted(by_e) != list(range(len(by_e))):
                raise ValueError(f"{stacked}: expert tensors {sorted(by_e)} are not 0..n-1")
            self.w[stacked] = np.stack([self.w.pop(by_e[e]) for e in range(len(by_e))])
            self.tensor_types[stacked] = self.tensor_types[by_e[0]]

    def _check_shapes(self):
        c = self.cfg
        need = {
            "token_embd.weight": (c.n_vocab, c.n_embd),
            "output_norm.weight": (c.n_embd,),
        }
        for il in range(c.n_layer):
            p = f"blk.{il}."
            need[p + "attn_norm.weight"] = (c.n_embd,)
            if c.kv_lora_rank:
                self._mla_shapes(need, p)
            else:
                need[p + "attn_q.weight"] = (c.n_head * c.head_dim, c.n_embd)
                need[p + "attn_k.weight"] = (c.n_head_kv * c.head_dim, c.n_embd)
                need[p + "attn_v.weight"] = (c.n_head_kv * c.head_dim_v, c.n_embd)
            need[p + "attn_output.weight"] = (c.n_embd, c.n_head * c.head_dim_v)
            need[p + c.ffn_norm + ".weight"] = (c.n_embd,)
            if c.n_expert and il >= c.dense_lead:
                need[p + "ffn_gate_inp.weight"] = (c.n_expert, c.n_embd)
                need[p + "ffn_gate_exps.weight"] = (c.n_expert, c.n_ff_exp, c.n_embd)
                need[p + "ffn_up_exps.weight"] = (c.n_expert, c.n_ff_exp, c.n_embd)
                need[p + "ffn_down_exps.weight"] = (c.n_expert, c.n_embd, c.n_ff_exp)
                if c.shexp_gated:
                    need[p + "ffn_gate_inp_shexp.weight"] = (c.n_embd,)
                if c.n_ff_shexp:
                    need[p + "ffn_gate_shexp.weight"] = (c.n_ff_shexp, c.n_embd)
                    need[p + "ffn_up_shexp.weight"] = (c.n_ff_shexp, c.n_embd)
                    need[p + "ffn_down_shexp.weight"] = (c.n_embd, c.n_ff_shexp)
            else:
                need[p + "ffn_gate.weight"] = (c.n_ff, c.n_embd)
                need[p + "ffn_up.weight"] = (c.n_ff, c.n_embd)
                need[p + "ffn_down.weight"] = (c.n_embd, c.n_ff)
            if c.arch in ("qwen3", "gemma3", "qwen3moe"):
                need[p + "attn_q_norm.weight"] = (c.head_dim,)
                need[p + "attn_k_norm.weight"] = (c.head_dim,)
            if c.post_norms:
                need[p + "post_attention_norm.weight"] = (c.n_embd,)
                need[p + "post_ffw_norm.weight"] = (c.n_embd,)
        for name, shape in need.items():
            if name not in self.w:
                raise ValueError(f"tensor {name} missing")
            if self.w[name].shape != shape:
                raise ValueError(f"tensor {name} has shape {self.w[name].shape}, want {shape}")

    def _mla_shapes(self, need: dict, p: str):
        c = self.cfg
        qh = c.qk_nope + c.rope_dims
        if c.q_lora_rank:
            need[p + "attn_q_a.weight"] = (c.q_lora_rank, c.n_embd)
            need[p + "attn_q_a_norm.weight"] = (c.q_lora_rank,)
            need[p + "attn_q_b.weight"] = (c.n_head * qh, c.q_lora_rank)
        else:
            need[p + "attn_q.weight"] = (c.n_head * qh, c.n_embd)
        need[p + "attn_kv_a_mqa.weight"] = (c.kv_lora_rank + c.rope_dims, c.n_embd)
        need[p + "attn_kv_a_norm.weight"] = (c.kv_lora_rank,)
        if p + "attn_kv_b.weight" in self.w:
            need[p + "attn_kv_b.weight"] = (c.n_head * (c.qk_nope + c.head_dim_v), c.kv_lora_rank)
        else:
            need[p + "attn_k_b.weight"] = (c.n_head, c.kv_lora_rank, c.qk_nope)
            need[p + "attn_v_b.weight"] = (c.n_head, c.head_dim_v, c.kv_lora_rank)

    def _mla(self, h: np.ndarray, p: str, pos: np.ndarray):
        """DeepseekV2Attention's q, k, v ([T, H, qk_nope + rope], [T, H, qk_nope + rope],
        [T, H, v_head]): keys and values decompressed per head from the normalized latent."""
        c = self.cfg
        n, H, N, D, R = h.shape[0], c.n_head, c.qk_nope, c.rope_dims, c.kv_lora_rank
        if c.q_lora_rank:
            qa = rms_norm(self._linear(h, p + "attn_q_a.weight"), self.w[p + "attn_q_a_norm.weight"], c.eps)
            q = self._linear(qa, p + "attn_q_b.weight")
        else:
            q = self._linear(h, p + "attn_q.weight")
        q = q.reshape(n, H, N + D)
        ckv = self._linear(h, p + "attn_kv_a_mqa.weight")
        lat = rms_norm(ckv[:, :R], self.w[p + "attn_kv_a_norm.weight"], c.eps)
        k_pe = rope(ckv[:, None, R:], pos, D, c.rope_base, "normal", yarn=c.yarn)        # [T, 1, D]
        if p + "attn_kv_b.weight" in self.w:
            kv = _matmul_t(lat, self.w[p + "attn_kv_b.weight"]).reshape(n, H, N + c.head_dim_v)
            k_nope, v = kv[..., :N], kv[..., N:]
        else:
            k_nope = np.einsum("tr,hrd->thd", lat, self.w[p + "attn_k_b.weight"].astype(np.float64))
            v = np.einsum("tr,hvr->thv", lat, self.w[p + "attn_v_b.weight"].astype(np.float64))
        q_pe = rope(q[..., N:], pos, D, c.rope_base, "normal", yarn=c.yarn)
        q = np.concatenate([q[..., :N], q_pe], axis=-1)
        k = np.concatenate([k_nope, np.broadcast_to(k_pe, (n, H, D))], axis=-1)
        return q, k, v

    def _opt(self, name):
        return self.w.get(name)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """x [T, n_in] @ W.T (+ bias) in float64; W is [n_out, n_in]."""
        w = self.w[name]
        if self.online == "int8" and name in self.online_names:
            m = rounding_tie_margin(x)
            self.tie_margin = m if self.tie_margin is None or self.tie_margin.shape != m.shape \
                else np.minimum(self.tie_margin, m)
            x = quantize_activations_q8(x, block=x.shape[-1])
        elif self.act_quant:
            x = self._engine_rounding(x, name)
        y = _matmul_t(x, w)
        b = self._opt(name.replace(".weight", ".bias"))
        if b is not None:
            y = y + b.astype(np.float64)
        return y

    def _expert_mm(self, x: np.ndarray, name: str, e: int) -> np.ndarray:
        """x [T, n_in] @ expert e's matrix of the stacked tensor `name`, with the activation
        rounding the engine applies for the tensor's type when act_quant is set."""
        if self.act_quant:
            x = self._engine_rounding(x, name)
        return _matmul_t(x, self.w[name][e])

    def _engine_rounding(self, x: np.ndarray, name: str) -> np.ndarray:
        """The activations as the engine rounds them for weights of name's type: bf16 for BF16,
        8-bit blocks of 32 for the quantized types, unchanged for F32 / F16."""
        ttype = self.tensor_types[name]
        if ttype == "BF16":
            return round_activations_bf16(x)
        if ttype not in ("F32", "F16", "F64"):
            return quantize_activations_q8(x)
        return x

    def _moe(self, h: np.ndarray, p: str, il: int) -> np.ndarray:
        """The sparse MoE block (Qwen3Moe / Qwen2Moe / MixtralSparseMoeBlock): per token, p = softmax(router(h)); the n_expert_used experts with
        the largest p (equal p: the lower expert index first); weights p_e, divided by their sum
        when expert_norm; output sum_e w_e * down_e(silu(gate_e(h)) * up_e(h)). Every routing
        decision is appended to self.moe_trace as (layer, token row, probs, chosen ids)."""
        c = self.cfg
        logits = _matmul_t(h, self.w[p + "ffn_gate_inp.weight"])
        if c.oai_moe:
            return self._oai_moe(h, p, il, logits + self.w[p + "ffn_gate_inp.bias"].astype(np.float64))
        if c.gating_sigmoid:
            probs = 1.0 / (1.0 + np.exp(-logits))
        else:
            z = logits - logits.max(axis=-1, keepdims=True)
            probs = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
        bias = self._opt(p + "exp_probs_b.bias")
        choice = probs + (bias.astype(np.float64) if bias is not None else 0.0)
        out = np.zeros_like(h, dtype=np.float64)
        for t in range(h.shape[0]):
            sc = choice[t].copy()
            if c.n_groups > 1:
                # DeepseekV3 noaux_tc: a group scores the sum of its two best choice scores; only
                # the n_group_used best groups stay eligible (HF fills the others with 0.0,
                # llama.cpp with -inf; the same choice while eligible scores are positive).
                g = sc.reshape(c.n_groups, -1)
                gs = np.sort(g, axis=1)[:, -2:].sum(axis=1)
                keep = sorted(range(c.n_groups), key=lambda i: (-gs[i], i))[:c.n_group_used]
                for i in range(c.n_groups):
                    if i not in keep:
                        g[i, :] = -np.inf
                sc = g.reshape(-1)
            order = sorted(range(c.n_expert), key=lambda e: (-sc[e], e))
            chosen = order[:c.n_expert_used]
            w = probs[t, chosen]
            if c.expert_norm:
                w = w / w.sum()
            w = w * c.w_scale
            self.moe_trace.append((il, t, probs[t].copy(), list(chosen)))
            for e, we in zip(chosen, w):
                a = silu(self._expert_mm(h[t:t + 1], p + "ffn_gate_exps.weight", e)) * \
                    self._expert_mm(h[t:t + 1], p + "ffn_up_exps.weight", e)
                out[t] += we * self._expert_mm(a, p + "ffn_down_exps.weight", e)[0]
        if c.n_ff_shexp:
            a = silu(self._linear(h, p + "ffn_gate_shexp.weight")) * self._linear(h, p + "ffn_up_shexp.weight")
            shared = self._linear(a, p + "ffn_down_shexp.weight")
            if c.shexp_gated:
                gate = 1.0 / (1.0 + np.exp(-(h @ self.w[p + "ffn_gate_inp_shexp.weight"].astype(np.float64))))
                shared = gate[:, None] * shared
            out = out + shared
        return out

    def _oai_moe(self, h: np.ndarray, p: str, il: int, logits: np.ndarray) -> np.ndarray:
        """GptOssMLP: the top-k router logits (equal ones: the lower index first), softmax over
        those k; each expert gate = h W_g + b_g, up = h W_u + b_u, clamped SwiGLU
        min(gate, 7) * sigmoid(1.702 min(gate, 7)) * (clamp(up, -7, 7) + 1), down with its bias."""
        c = self.cfg
        gb, ub, db = (self.w[p + n].astype(np.float64) for n in ("ffn_gate_exps.bias", "ffn_up_exps.bias",
                                                                 "ffn_down_exps.bias"))
        out = np.zeros_like(h, dtype=np.float64)
        for t in range(h.shape[0]):
            chosen = sorted(range(c.n_expert), key=lambda e: (-logits[t, e], e))[:c.n_expert_used]
            z = logits[t, chosen] - logits[t, chosen].max()
            w = np.exp(z) / np.exp(z).sum()
            self.moe_trace.append((il, t, logits[t].copy(), list(chosen)))
            for e, we in zip(chosen, w):
                g = np.minimum(self._expert_mm(h[t:t + 1], p + "ffn_gate_exps.weight", e)[0] + gb[e], 7.0)
                u = np.clip(self._expert_mm(h[t:t + 1], p + "ffn_up_exps.weight", e)[0] + ub[e], -7.0, 7.0)
                a = g / (1.0 + np.exp(-1.702 * g)) * (u + 1.0)
                out[t] += we * (self._expert_mm(a[None, :], p + "ffn_down_exps.weight", e)[0] + db[e])
        return out

    def output_matrix_name(self) -> str:
        return "output.weight" if "output.weight" in self.w else "token_embd.weight"

    # -- forward ------------------------------------------------------------------------------
    def new_cache(self) -> KvCache:
        return KvCache(self.cfg.n_layer)

    def forward(self, tokens, cache: KvCache | None = None, logits_rows: str = "all") -> np.ndarray:
        """Runs `tokens` at positions cache.n_past .. cache.n_past + len - 1 (0.. without a cache)
        and returns float64 logits [len, n_vocab] ("all") or [1, n_vocab] ("last")."""
        c = self.cfg
        tokens = np.asarray(list(tokens), dtype=np.int64)
        if tokens.size == 0:
            raise ValueError("no tokens")
        if tokens.min() < 0 or tokens.max() >= c.n_vocab:
            raise ValueError("token id out of range")
        if cache is None:
            cache = self.new_cache()
        start = cache.n_past
        n = tokens.size
        pos = np.arange(start, start + n)

        x = self.w["token_embd.weight"][tokens].astype(np.float64) * c.embd_scale
        for il in range(c.n_layer):
            p = f"blk.{il}."
            local = c.local_layers[il]
            h = rms_norm(x, self.w[p + "attn_norm.weight"], c.eps)
            if c.kv_lora_rank:
                q, k, v = self._mla(h, p, pos)
            else:
                q = self._linear(h, p + "attn_q.weight").reshape(n, c.n_head, c.head_dim)
                k = self._linear(h, p + "attn_k.weight").reshape(n, c.n_head_kv, c.head_dim)
                v = self._linear(h, p + "attn_v.weight").reshape(n, c.n_head_kv, c.head_dim_v)
                qn = self._opt(p + "attn_q_norm.weight")
                kn = self._opt(p + "attn_k_norm.weight")
                if qn is not None:
                    q = rms_norm(q, qn, c.eps)
                if kn is not None:
                    k = rms_norm(k, kn, c.eps)
                base = c.rope_base_local if local else c.rope_base
                factor = 1.0 if (local and c.arch == "gemma3") else c.rope_linear_factor
                yarn = None if (local and c.arch == "gemma3") else c.yarn
                q = rope(q, pos, c.rope_dims, base, c.rope_layout, factor, yarn)
                k = rope(k, pos, c.rope_dims, base, c.rope_layout, factor, yarn)
            if cache.k[il] is None:
                cache.k[il], cache.v[il] = k, v
            else:
                cache.k[il] = np.concatenate([cache.k[il], k], axis=0)
                cache.v[il] = np.concatenate([cache.v[il], v], axis=0)
            kpos = np.arange(cache.k[il].shape[0])
            att = attention(q, cache.k[il], cache.v[il], pos, kpos, c.attn_scale,
                            c.sliding_window if local else 0, self._opt(p + "attn_sinks.weight"))
            o = self._linear(att.reshape(n, c.n_head * c.head_dim_v), p + "attn_output.weight")
            if c.post_norms:
                o = rms_norm(o, self.w[p + "post_attention_norm.weight"], c.eps)
            x = x + o

            h = rms_norm(x, self.w[p + c.ffn_norm + ".weight"], c.eps)
            if c.n_expert and il >= c.dense_lead:
                f = self._moe(h, p, il)
            else:
                g = self._linear(h, p + "ffn_gate.weight")
                u = self._linear(h, p + "ffn_up.weight")
                a = (gelu_tanh(g) if c.gelu_ffn else silu(g)) * u
                f = self._linear(a, p + "ffn_down.weight")
            if c.post_norms:
                f = rms_norm(f, self.w[p + "post_ffw_norm.weight"], c.eps)
            x = x + f
        cache.n_past += n

        if logits_rows == "last":
            x = x[-1:]
        elif logits_rows != "all":
            raise ValueError("logits_rows must be 'all' or 'last'")
        x = rms_norm(x, self.w["output_norm.weight"], c.eps)
        return self._linear(x, self.output_matrix_name())

    def logits(self, tokens) -> np.ndarray:
        """Logits [len(tokens), n_vocab] of tokens at positions 0..len-1 (also sets tie_margin
        for online int8)."""
        self.tie_margin = None
        self.moe_trace = []
        return self.forward(tokens, None, "all")

    def greedy(self, prompt_ids, n_new: int, stop_at_eos: bool = True) -> list:
        """Greedy continuation: up to n_new argmax tokens after prompt_ids (the EOS token, when
        generated, is included and ends the generation if stop_at_eos)."""
        cache = self.new_cache()
        lg = self.forward(prompt_ids, cache, "last")
        out = []
        for _ in range(n_new):
            t = int(np.argmax(lg[-1]))
            out.append(t)
            if stop_at_eos and t == self.cfg.eos_id:
                break
            lg = self.forward([t], cache, "last")
        return out


def _matmul_t(x: np.ndarray, w: np.ndarray, chunk_rows: int = 32768) -> np.ndarray:
    """x [T, n_in] (float64) @ w.T for w [n_out, n_in] (float32), in float64, converting w in
    chunks of rows so huge matrices (a 262144-row embedding) need no full float64 copy."""
    x = np.asarray(x, dtype=np.float64)
    if w.shape[0] <= chunk_rows:
        return x @ w.astype(np.float64).T
    out = np.empty((x.shape[0], w.shape[0]), dtype=np.float64)
    for r in range(0, w.shape[0], chunk_rows):
        out[:, r:r + chunk_rows] = x @ w[r:r + chunk_rows].astype(np.float64).T
    return out


# ----------------------------------------------------------------------------------------------
# Command line: python ref_model.py MODEL.gguf --tokens 1,2,3 [--greedy N]
# ----------------------------------------------------------------------------------------------

def _main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy ids after the tokens")
    ap.add_argument("--act-quant", action="store_true")
    args = ap.parse_args(argv)
    m = RefModel(args.model, act_quant=args.act_quant)
    ids = [int(s) for s in args.tokens.split(",") if s.strip()]
    if args.greedy:
        print(" ".join(str(t) for t in m.greedy(ids, args.greedy)))
    else:
        lg = m.logits(ids)
        for row in lg:
            print(int(np.argmax(row)), float(row.max()))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

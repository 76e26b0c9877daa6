"""Independent numpy reference of nomic-bert sentence embeddings (Nomic's NomicBertModel, e.g.
nomic-embed-text-v1 / v1.5), read straight from a Hugging Face folder.

What it is: a slow, straightforward float64 implementation of the NomicBert encoder as Nomic's
Hugging Face modelling code (modeling_hf_nomic_bert.py, `trust_remote_code`) defines it for the
configurations those models use, followed by sentence-transformers' Pooling and Normalize. Ground
truth for Triad's nomic-bert golden test (tests/golden/test_nomic_bert.py); written from the
architecture's definition only, never from Triad's C++ code, and reading the *safetensors* weights
(not a converted GGUF), so it also checks Triad's converter.

Definition implemented (post-LayerNorm, rotary positions, no biases on the linears):
  x   = LayerNorm_emb(word_emb[ids] + type_emb[0])                   (no position embeddings)
  per layer:
    q, k, v = split(x Wqkv^T)             Wqkv [3E, E]: rows q, then k, then v; heads of D = E / H
    q, k    = RoPE(q), RoPE(k)            GPT-NeoX "rotate half" over the whole head, positions 0..T-1:
              out = x cos + rotate_half(x) sin,  rotate_half(x) = concat(-x[D/2:], x[:D/2]),
              angle(pos, j) = pos * base^(-2j / D) for j < D/2, cos / sin repeated over both halves
    a   = softmax(q k^T / sqrt(D)) v      (bidirectional: no mask)
    x   = LayerNorm_1(x + a Wout^T)
    y   = (x Wfc11^T) * silu(x Wfc12^T)   (fc11: "up", fc12: the gate; swiglu)
    x   = LayerNorm_2(x + y Wfc2^T)
  pooled    = mean over the T positions | x[0] (cls) | x[T-1] (last), per 1_Pooling/config.json
  embedding = pooled / ||pooled||_2

Configurations: what nomic-embed-text v1 / v1.5 use, and nothing else (anything else is a
ValueError rather than a silently different model): activation_function "swiglu",
rotary_emb_fraction 1.0, rotary_emb_interleaved false, rotary_emb_scale_base null, prenorm false,
causal false, no qkv / fc1 / fc2 biases. Like the modelling code: the word table has vocab_size
rows rounded up to pad_vocab_size_multiple (default 1), and the gated MLP's width is n_inner
rounded up to a multiple of 256. rotary_scaling_factor (dynamic NTK) only acts past
max_trained_positions, and the reference refuses inputs that long.

Properties:
  * Weights are kept as float32 (the exact stored values); every product, norm, softmax, rotation
    and residual is computed in float64.
  * Token ids are used exactly as given: no [CLS] / [SEP] is added.
  * `python3 nomic_bert_ref.py` runs `self_check` (no model files needed) and prints a summary.

Thread-safety: a NomicBertRef is immutable after construction; `embed` and friends may be called
from several threads. The module-level cache of `load` is not locked (use from one thread).
"""
from __future__ import annotations

import json
import math
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# sentence-transformers' module files (pooling, normalize) are read as for BERT.
from bert_ref import _has_normalize, _pooling_mode, cosine, l2_normalize  # noqa: E402

POOLING_MODES = ("mean", "cls", "last")
MLP_MULTIPLE_OF = 256  # NomciBertGatedMLP rounds its hidden width up to a multiple of this


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """torch.nn.LayerNorm over the last axis: (x - mean) / sqrt(biased var + eps) * w + b."""
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * w + b


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rotate_half(x: np.ndarray) -> np.ndarray:
    """concat(-x2, x1) of the two halves of the last axis (the non-interleaved layout)."""
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope_cos_sin(n_pos: int, dim: int, base: float) -> tuple:
    """cos, sin [n_pos, dim] at positions 0..n_pos-1: angle pos * base^(-2j/dim) for j < dim/2,
    the dim/2 angles repeated over both halves."""
    inv_freq = 1.0 / (float(base) ** (np.arange(0, dim, 2, dtype=np.float64) / dim))   # [dim/2]
    ang = np.arange(n_pos, dtype=np.float64)[:, None] * inv_freq[None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang), np.sin(ang)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [T, H, D] rotated at positions 0..T-1: x cos + rotate_half(x) sin."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


class NomicBertRef:
    """A NomicBertModel encoder from a config dict and float32 weights (Hugging Face names)."""

    def __init__(self, cfg: dict, weights: dict, pooling: str = "mean", normalize: bool = True):
        def need(key, want):
            got = cfg.get(key, want)
            if got != want:
                raise ValueError(f"nomic-bert reference: {key} = {got!r} is not supported ({want!r} only)")

        need("activation_function", "swiglu")
        need("rotary_emb_fraction", 1.0)
        need("rotary_emb_interleaved", False)
        need("rotary_emb_scale_base", None)
        need("prenorm", False)
        need("causal", False)
        for b in ("qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias"):
            need(b, False)
        self.cfg = cfg
        self.n_embd = int(cfg["n_embd"])
        self.n_layer = int(cfg["n_layer"])
        self.n_head = int(cfg["n_head"])
        if self.n_embd % self.n_head:
            raise ValueError("n_embd must be a multiple of n_head")
        self.head_dim = self.n_embd // self.n_head
        n_inner = cfg.get("n_inner") or 4 * self.n_embd
        self.n_ff = -(-int(n_inner) // MLP_MULTIPLE_OF) * MLP_MULTIPLE_OF
        mult = int(cfg.get("pad_vocab_size_multiple", 1) or 1)
        self.n_vocab = -(-int(cfg["vocab_size"]) // mult) * mult
        self.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
        self.base = float(cfg.get("rotary_emb_base", 10000.0))
        self.n_ctx = int(cfg.get("max_trained_positions", 2048))
        self.pooling = pooling
        self.normalize = normalize
        self._rotate = True  # self_check turns the rotation off to show what it does
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling {pooling!r}: one of {POOLING_MODES}")
        self.w = dict(weights)
        E, F = self.n_embd, self.n_ff
        want = {"embeddings.word_embeddings.weight": (self.n_vocab, E), "emb_ln.weight": (E,), "emb_ln.bias": (E,)}
        if int(cfg.get("type_vocab_size", 2)) > 0:
            want["embeddings.token_type_embeddings.weight"] = (int(cfg.get("type_vocab_size", 2)), E)
        for i in range(self.n_layer):
            p = f"encoder.layers.{i}."
            want.update({p + "attn.Wqkv.weight": (3 * E, E), p + "attn.out_proj.weight": (E, E),
                         p + "mlp.fc11.weight": (F, E), p + "mlp.fc12.weight": (F, E), p + "mlp.fc2.weight": (E, F)})
            for n in ("norm1", "norm2"):
                want.update({p + n + ".weight": (E,), p + n + ".bias": (E,)})
        for name, shape in want.items():
            if name not in self.w:
                raise ValueError(f"nomic-bert reference: {name} is missing")
            if tuple(self.w[name].shape) != shape:
                raise ValueError(f"nomic-bert reference: {name} is {tuple(self.w[name].shape)}, expected {shape}")

    @classmethod
    def from_folder(cls, folder: str) -> "NomicBertRef":
        from safetensors.numpy import load_file

        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        if cfg.get("model_type", "nomic_bert") != "nomic_bert":
            raise ValueError(f"{folder}: model_type {cfg.get('model_type')!r} is not nomic_bert")
        w = {}
        for fn in sorted(os.listdir(folder)):
            if fn.endswith(".safetensors"):
                w.update(load_file(os.path.join(folder, fn)))
        return cls(cfg, w, _pooling_mode(folder), _has_normalize(folder))

    def _t(self, name: str) -> np.ndarray:
        return self.w[name].astype(np.float64)

    def _ln(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return layer_norm(x, self._t(prefix + ".weight"), self._t(prefix + ".bias"), self.eps)

    def hidden_states(self, token_ids) -> np.ndarray:
        """The last layer's output [T, n_embd] (float64) for token ids used exactly as given."""
        ids = np.asarray([int(t) for t in token_ids], dtype=np.int64)
        T = ids.size
        if T == 0:
            raise ValueError("no tokens")
        if T > self.n_ctx:
            raise ValueError(f"{T} tokens exceed max_trained_positions {self.n_ctx}")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError("token id out of range")
        E, H, D = self.n_embd, self.n_head, self.head_dim
        x = self.w["embeddings.word_embeddings.weight"][ids].astype(np.float64)
        if "embeddings.token_type_embeddings.weight" in self.w:
            x = x + self._t("embeddings.token_type_embeddings.weight")[0]
        x = self._ln(x, "emb_ln")
        cos, sin = rope_cos_sin(T, D, self.base)
        if not self._rotate:
            cos, sin = np.ones_like(cos), np.zeros_like(sin)
        scale = 1.0 / math.sqrt(D)
        for i in range(self.n_layer):
            p = f"encoder.layers.{i}."
            qkv = x @ self._t(p + "attn.Wqkv.weight").T                      # [T, 3E]
            q = apply_rope(qkv[:, 0:E].reshape(T, H, D), cos, sin)
            k = apply_rope(qkv[:, E:2 * E].reshape(T, H, D), cos, sin)
            v = qkv[:, 2 * E:3 * E].reshape(T, H, D)
            s = np.einsum("thd,shd->hts", q, k) * scale                        # [H, T, T]
            a = np.einsum("hts,shd->thd", softmax(s, axis=-1), v).reshape(T, E)
            x = self._ln(x + a @ self._t(p + "attn.out_proj.weight").T, p + "norm1")
            y = (x @ self._t(p + "mlp.fc11.weight").T) * silu(x @ self._t(p + "mlp.fc12.weight").T)
            x = self._ln(x + y @ self._t(p + "mlp.fc2.weight").T, p + "norm2")
        return x

    def pooled(self, token_ids, pooling: str | None = None) -> np.ndarray:
        mode = pooling or self.pooling
        x = self.hidden_states(token_ids)
        if mode == "mean":
            return x.mean(axis=0)
        if mode == "cls":
            return x[0]
        if mode == "last":
            return x[-1]
        raise ValueError(f"pooling {mode!r}: one of {POOLING_MODES}")

    def embed(self, token_ids, pooling: str | None = None) -> np.ndarray:
        """The unit-length embedding [n_embd] (float64) of token ids used exactly as given."""
        return l2_normalize(self.pooled(token_ids, pooling))


_models: dict = {}


def load(folder: str) -> NomicBertRef:
    """A NomicBertRef of the folder, loaded once per process."""
    key = os.path.realpath(folder)
    if key not in _models:
        _models[key] = NomicBertRef.from_folder(folder)
    return _models[key]


# ----------------------------------------------------------------------------------------------
# Self-check: no model files needed
# ----------------------------------------------------------------------------------------------

def tiny_config(**over) -> dict:
    """A small nomic_bert config.json (nomic-embed-text-v1.5's settings, small sizes)."""
    cfg = {"architectures": ["NomicBertModel"], "model_type": "nomic_bert", "n_embd": 32, "n_layer": 2, "n_head": 4,
           "n_inner": 256, "n_positions": 2048, "max_trained_positions": 2048, "rotary_emb_base": 1000,
           "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False, "rotary_emb_scale_base": None,
           "activation_function": "swiglu", "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False,
           "layer_norm_epsilon": 1e-12, "type_vocab_size": 2, "vocab_size": 50, "prenorm": False, "causal": False}
    cfg.update(over)
    return cfg


def random_weights(cfg: dict, seed: int, scale: float = 0.08) -> dict:
    """Random float32 weights of a NomicBertModel with cfg (Hugging Face names and shapes)."""
    rng = np.random.default_rng(seed)
    E, L = int(cfg["n_embd"]), int(cfg["n_layer"])
    F = -(-int(cfg["n_inner"]) // MLP_MULTIPLE_OF) * MLP_MULTIPLE_OF
    mult = int(cfg.get("pad_vocab_size_multiple", 1) or 1)
    V = -(-int(cfg["vocab_size"]) // mult) * mult

    def mat(*shape, s=scale):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    def norm(prefix):
        w[prefix + ".weight"] = (1.0 + 0.1 * rng.standard_normal(E)).astype(np.float32)
        w[prefix + ".bias"] = (0.05 * rng.standard_normal(E)).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": mat(V, E, s=0.5),
         "embeddings.token_type_embeddings.weight": mat(int(cfg.get("type_vocab_size", 2)), E, s=0.5)}
    norm("emb_ln")
    for i in range(L):
        p = f"encoder.layers.{i}."
        w[p + "attn.Wqkv.weight"] = mat(3 * E, E, s=2 * scale)
        w[p + "attn.out_proj.weight"] = mat(E, E)
        norm(p + "norm1")
        w[p + "mlp.fc11.weight"] = mat(F, E)
        w[p + "mlp.fc12.weight"] = mat(F, E)
        w[p + "mlp.fc2.weight"] = mat(E, F)
        norm(p + "norm2")
    return w


def _slow_hidden_states(cfg: dict, w: dict, ids) -> np.ndarray:
    """The same definition, written token by token and head by head with plain Python scalars for
    the rotation (pairs (j, j + D/2) turned by pos * base^(-2j/D), cmath-style) and attention, as
    a check of the vectorized code's indexing."""
    E, H = int(cfg["n_embd"]), int(cfg["n_head"])
    D = E // H
    eps, base = float(cfg["layer_norm_epsilon"]), float(cfg["rotary_emb_base"])
    f = {k: v.astype(np.float64) for k, v in w.items()}

    def ln(v, p):
        mu = sum(v) / len(v)
        var = sum((t - mu) ** 2 for t in v) / len(v)
        return [(t - mu) / math.sqrt(var + eps) * f[p + ".weight"][j] + f[p + ".bias"][j] for j, t in enumerate(v)]

    def rot(vec, pos):
        out = list(vec)
        for j in range(D // 2):
            th = pos * base ** (-2.0 * j / D)
            z = complex(vec[j], vec[j + D // 2]) * complex(math.cos(th), math.sin(th))
            out[j], out[j + D // 2] = z.real, z.imag
        return out

    T = len(ids)
    xs = [ln(list(f["embeddings.word_embeddings.weight"][t] + f["embeddings.token_type_embeddings.weight"][0]), "emb_ln")
          for t in ids]
    for i in range(int(cfg["n_layer"])):
        p = f"encoder.layers.{i}."
        Wqkv = f[p + "attn.Wqkv.weight"]
        qkv = [list(Wqkv @ np.array(x)) for x in xs]
        heads = []
        for t in range(T):
            heads.append([(rot(qkv[t][h * D:(h + 1) * D], t), rot(qkv[t][E + h * D:E + (h + 1) * D], t),
                           qkv[t][2 * E + h * D:2 * E + (h + 1) * D]) for h in range(H)])
        new = []
        for t in range(T):
            att = []
            for h in range(H):
                q = heads[t][h][0]
                sc = [sum(a * b for a, b in zip(q, heads[s][h][1])) / math.sqrt(D) for s in range(T)]
                m = max(sc)
                e = [math.exp(c - m) for c in sc]
                z = sum(e)
                att += [sum(e[s] / z * heads[s][h][2][d] for s in range(T)) for d in range(D)]
            o = f[p + "attn.out_proj.weight"] @ np.array(att)
            x1 = ln([a + b for a, b in zip(xs[t], o)], p + "norm1")
            up = f[p + "mlp.fc11.weight"] @ np.array(x1)
            gate = f[p + "mlp.fc12.weight"] @ np.array(x1)
            y = [u * (g / (1.0 + math.exp(-g))) for u, g in zip(up, gate)]
            new.append(ln([a + b for a, b in zip(x1, f[p + "mlp.fc2.weight"] @ np.array(y))], p + "norm2"))
        xs = new
    return np.array(xs)


def self_check(verbose: bool = False) -> dict:
    """Checks of the reference on random tiny models (raises AssertionError):
      * rotate-half RoPE equals turning each pair (j, j + D/2) as a complex number by
        pos * base^(-2j/D), and tests/reference/ref_model.rope's "neox" layout;
      * q.k after RoPE depends only on the distance between the positions;
      * the vectorized forward equals a scalar, token-by-token one (_slow_hidden_states);
      * embeddings are unit length; positions matter (reversing the tokens changes the pooled
        vector) while, with the rotation turned off, mean pooling of a bidirectional encoder
        without positions is order-independent;
      * configurations outside the definition are refused.
    Returns a dict of the measured differences."""
    out = {}
    rng = np.random.default_rng(0)
    T, H, D, base = 40, 3, 16, 1000.0
    x = rng.standard_normal((T, H, D))
    cos, sin = rope_cos_sin(T, D, base)
    got = apply_rope(x, cos, sin)
    want = np.empty_like(x)
    for t in range(T):
        th = t * base ** (-2.0 * np.arange(D // 2) / D)
        z = (x[t, :, :D // 2] + 1j * x[t, :, D // 2:]) * np.exp(1j * th)
        want[t, :, :D // 2], want[t, :, D // 2:] = z.real, z.imag
    out["rope_vs_complex"] = float(np.abs(got - want).max())
    assert out["rope_vs_complex"] < 1e-12, out
    import ref_model  # the repository's decoder reference, written separately
    out["rope_vs_ref_model"] = float(np.abs(got - ref_model.rope(x, np.arange(T), D, base, "neox")).max())
    assert out["rope_vs_ref_model"] < 1e-12, out
    q, k = rng.standard_normal(D), rng.standard_normal(D)
    cs, sn = rope_cos_sin(64, D, base)

    def dot(m, n):
        return float(apply_rope(q[None, None], cs[m:m + 1], sn[m:m + 1])[0, 0] @
                     apply_rope(k[None, None], cs[n:n + 1], sn[n:n + 1])[0, 0])
    assert abs(dot(3, 10) - dot(40, 47)) < 1e-10 and abs(dot(3, 10) - dot(3, 11)) > 1e-6

    cfg = tiny_config()
    w = random_weights(cfg, seed=1)
    m = NomicBertRef(cfg, w)
    ids = [1, 7, 3, 3, 42, 0, 19]
    fast = m.hidden_states(ids)
    slow = _slow_hidden_states(cfg, w, ids)
    out["vectorized_vs_scalar"] = float(np.abs(fast - slow).max())
    assert out["vectorized_vs_scalar"] < 1e-10, out
    e = m.embed(ids)
    assert e.shape == (cfg["n_embd"],) and np.all(np.isfinite(e)) and abs(np.linalg.norm(e) - 1.0) < 1e-12
    out["reversed_cosine"] = cosine(e, m.embed(ids[::-1]))
    assert out["reversed_cosine"] < 1 - 1e-6, "positions had no effect"
    flat = NomicBertRef(cfg, w)
    flat._rotate = False
    out["reversed_cosine_no_rotation"] = cosine(flat.embed(ids), flat.embed(ids[::-1]))
    assert out["reversed_cosine_no_rotation"] > 1 - 1e-12, out
    assert np.array_equal(m.embed(ids), m.embed(ids)), "not deterministic"
    for bad in ({"rotary_emb_interleaved": True}, {"activation_function": "gelu"}, {"prenorm": True},
                {"rotary_emb_fraction": 0.5}, {"qkv_proj_bias": True}, {"rotary_emb_scale_base": 512}):
        try:
            NomicBertRef(tiny_config(**bad), w)
        except ValueError as ex:
            assert next(iter(bad)) in str(ex), ex
        else:
            raise AssertionError(f"{bad} accepted")
    if verbose:
        for k2, v2 in out.items():
            print(f"{k2}: {v2:.3g}")
    return out


if __name__ == "__main__":
    self_check(verbose=True)
    print("nomic_bert_ref self-check passed")

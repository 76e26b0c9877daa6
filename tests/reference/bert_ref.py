"""Independent numpy reference of BERT sentence embeddings (sentence-transformers models such
as all-MiniLM-L6-v2), read straight from a Hugging Face folder.

What it is: a slow, straightforward float64 implementation of the BERT encoder as published
(Devlin et al. 2018; Hugging Face transformers' BertModel) followed by sentence-transformers'
Pooling and Normalize modules, used as ground truth for Triad's /v1/embeddings golden test
(tests/golden/test_embeddings.py). It is written from the architecture's definition only, never
from Triad's C++ code, and reads the *safetensors* weights (not a converted GGUF), so it also
checks Triad's converter.

Definition implemented (post-LayerNorm BERT, absolute positions, one segment):
  x   = LayerNorm(word_emb[ids] + pos_emb[0..T-1] + type_emb[0])
  per layer:
    q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv        (split into n_head heads)
    a   = softmax(q k^T / sqrt(head_dim)) v                 (bidirectional: no mask)
    x   = LayerNorm(x + a Wo^T + bo)
    h   = gelu(x W1^T + b1)                                 (exact erf GELU)
    x   = LayerNorm(x + h W2^T + b2)
  pooled = mean over the T positions | x[0] (cls) | x[T-1] (last), per 1_Pooling/config.json
  embedding = pooled / ||pooled||_2 (modules.json's Normalize; the API always normalizes)

Properties:
  * Weights are kept as float32 (the exact stored values) and every product, norm, softmax and
    residual is computed in float64; GELU uses the C library's erf (math.erf) element by element.
  * Token ids are used exactly as given: no [CLS] / [SEP] is added (tokenize with the folder's
    tokenizer.json, e.g. `hf_tokenizer`, for the ids of a text). At most max_position_embeddings
    ids (512 for MiniLM); more is a ValueError.
  * `python3 bert_ref.py [FOLDER]` runs `self_check` (needs PyPI tokenizers) and prints cosines.

Thread-safety: a BertRef is immutable after construction; `embed` and friends may be called from
several threads. The module-level cache of `load` is not locked (use from one thread).
"""
from __future__ import annotations

import json
import math
import os
import sys

# Multi-threaded OpenBLAS is many times slower than one thread for these small products on a
# busy 2-core machine; takes effect only if numpy is not imported yet.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

POOLING_MODES = ("mean", "cls", "last")


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * w + b (population variance)."""
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def erf(x: np.ndarray) -> np.ndarray:
    """The error function element-wise in float64 (numpy has none): math.erf on every value."""
    flat = np.ascontiguousarray(x, dtype=np.float64).ravel()
    out = np.fromiter(map(math.erf, flat.tolist()), dtype=np.float64, count=flat.size)
    return out.reshape(np.shape(x))


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU (transformers' "gelu"): 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def _pooling_mode(folder: str) -> str:
    """The pooling of the folder's sentence-transformers Pooling module (mean when there is none,
    as sentence-transformers does for a plain transformers folder)."""
    path = None
    mods = os.path.join(folder, "modules.json")
    if os.path.exists(mods):
        with open(mods, encoding="utf-8") as f:
            for m in json.load(f):
                if m.get("type", "").endswith("Pooling"):
                    path = os.path.join(folder, m.get("path", ""), "config.json")
    if path is None and os.path.exists(os.path.join(folder, "1_Pooling", "config.json")):
        path = os.path.join(folder, "1_Pooling", "config.json")
    if path is None:
        return "mean"
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    on = [k for k in ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_lasttoken",
                      "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                      "pooling_mode_weightedmean_tokens") if cfg.get(k)]
    names = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
             "pooling_mode_lasttoken": "last"}
    if len(on) != 1 or on[0] not in names:
        raise ValueError(f"{path}: pooling {on} not supported by the reference (one of mean, cls, last)")
    return names[on[0]]


def _has_normalize(folder: str) -> bool:
    mods = os.path.join(folder, "modules.json")
    if not os.path.exists(mods):
        return False
    with open(mods, encoding="utf-8") as f:
        return any(m.get("type", "").endswith("Normalize") for m in json.load(f))


class BertRef:
    """A BERT encoder read from a Hugging Face folder (config.json + model.safetensors)."""

    def __init__(self, folder: str):
        from safetensors.numpy import load_file

        self.folder = folder
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        if cfg.get("model_type", "bert") != "bert":
            raise ValueError(f"{folder}: model_type {cfg.get('model_type')!r} is not bert")
        if cfg.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{folder}: hidden_act {cfg.get('hidden_act')!r} (the reference has exact gelu)")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{folder}: only absolute position embeddings are supported")
        self.cfg = cfg
        self.n_embd = int(cfg["hidden_size"])
        self.n_layer = int(cfg["num_hidden_layers"])
        self.n_head = int(cfg["num_attention_heads"])
        self.head_dim = self.n_embd // self.n_head
        self.n_ff = int(cfg["intermediate_size"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.n_ctx = int(cfg["max_position_embeddings"])
        self.n_vocab = int(cfg["vocab_size"])
        self.pooling = _pooling_mode(folder)
        self.normalize = _has_normalize(folder)

        raw = load_file(os.path.join(folder, "model.safetensors"))
        # BertForMaskedLM-style checkpoints prefix the encoder's names with "bert.".
        w = {}
        for k, v in raw.items():
            w[k[5:] if k.startswith("bert.") else k] = v
        self.w = w
        want = self.n_vocab, self.n_embd
        assert w["embeddings.word_embeddings.weight"].shape == want, "word embeddings shape"

    def _t(self, name: str) -> np.ndarray:
        """One weight as float64 (converted on use, so the 30k-row word table stays float32)."""
        return self.w[name].astype(np.float64)

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self._t(prefix + ".weight").T + self._t(prefix + ".bias")

    def _ln(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return layer_norm(x, self._t(prefix + ".weight"), self._t(prefix + ".bias"), self.eps)

    def hidden_states(self, token_ids) -> np.ndarray:
        """The last layer's output [T, n_embd] (float64) for token ids used exactly as given."""
        ids = np.asarray([int(t) for t in token_ids], dtype=np.int64)
        T = ids.size
        if T == 0:
            raise ValueError("no tokens")
        if T > self.n_ctx:
            raise ValueError(f"{T} tokens exceed max_position_embeddings {self.n_ctx}")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError("token id out of range")
        x = self.w["embeddings.word_embeddings.weight"][ids].astype(np.float64)
        x = x + self._t("embeddings.position_embeddings.weight")[:T]
        x = x + self._t("embeddings.token_type_embeddings.weight")[0]
        x = self._ln(x, "embeddings.LayerNorm")
        H, D = self.n_head, self.head_dim
        scale = 1.0 / math.sqrt(D)
        for i in range(self.n_layer):
            p = f"encoder.layer.{i}."
            q = self._linear(x, p + "attention.self.query").reshape(T, H, D).transpose(1, 0, 2)
            k = self._linear(x, p + "attention.self.key").reshape(T, H, D).transpose(1, 0, 2)
            v = self._linear(x, p + "attention.self.value").reshape(T, H, D).transpose(1, 0, 2)
            probs = softmax((q @ k.transpose(0, 2, 1)) * scale, axis=-1)   # [H, T, T]
            a = (probs @ v).transpose(1, 0, 2).reshape(T, H * D)
            x = self._ln(x + self._linear(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = gelu(self._linear(x, p + "intermediate.dense"))
            x = self._ln(x + self._linear(h, p + "output.dense"), p + "output.LayerNorm")
        return x

    def pooled(self, token_ids, pooling: str | None = None) -> np.ndarray:
        """The pooled, not normalized, vector [n_embd] (float64)."""
        mode = pooling or self.pooling
        if mode not in POOLING_MODES:
            raise ValueError(f"pooling {mode!r}: one of {POOLING_MODES}")
        x = self.hidden_states(token_ids)
        if mode == "mean":
            return x.mean(axis=0)
        return x[0] if mode == "cls" else x[-1]

    def embed(self, token_ids, pooling: str | None = None) -> np.ndarray:
        """The unit-length embedding [n_embd] (float64) of token ids used exactly as given."""
        return l2_normalize(self.pooled(token_ids, pooling))


def l2_normalize(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def cosine(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


_models: dict = {}


def load(folder: str) -> BertRef:
    """A BertRef of the folder, loaded once per process."""
    key = os.path.realpath(folder)
    if key not in _models:
        _models[key] = BertRef(folder)
    return _models[key]


def embed(folder: str, token_ids, pooling: str | None = None) -> np.ndarray:
    """The unit-length embedding of token ids (used exactly as given) by the folder's model."""
    return load(folder).embed(token_ids, pooling)


def hf_tokenizer(folder: str):
    """The folder's tokenizer.json as PyPI tokenizers reads it, with the truncation and fixed
    padding that sentence-transformers folders configure turned off (an API embeds the whole
    input, or rejects it)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


# Pairs (anchor, related, unrelated): a sentence embedding must put the related sentence nearer.
SELF_CHECK_TRIPLES = [
    ("A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."),
    ("A man is riding a horse.", "A man is riding a white horse on an enclosed ground.", "A man is eating pasta."),
    ("The new movie is awesome.", "The new movie is so great.", "The cat sits outside."),
    ("How do I reset my password?", "I forgot my password and need to change it.", "Paris is the capital of France."),
]


# Cosine similarities of all-MiniLM-L6-v2 embeddings published, rounded to 4 decimals, in the
# sentence-transformers documentation (sbert.net: the quickstart's similarity example and the
# semantic-search example, computed by PyTorch): an external check of the whole reference.
PUBLISHED_MINILM = [
    ("A man is eating pasta.", "A man is eating food.", 0.7035),
    ("A man is eating pasta.", "A man is eating a piece of bread.", 0.5272),
    ("A man is eating pasta.", "A man is riding a horse.", 0.1889),
    ("A man is eating pasta.", "A man is riding a white horse on an enclosed ground.", 0.1047),
    ("The new movie is awesome", "The new movie is so great", 0.8939),
    ("The cat sits outside", "The dog plays in the garden", 0.2838),
]


def self_check(folder: str, verbose: bool = False) -> dict:
    """Sanity checks of the reference on a real sentence-embedding model (raises AssertionError):
      * embeddings are unit length and finite; the pooling is the folder's;
      * for every triple of SELF_CHECK_TRIPLES, cos(anchor, related) > cos(anchor, unrelated) + 0.1;
      * for all-MiniLM-L6-v2 (a folder of that name): the cosines of PUBLISHED_MINILM, within
        their 4-decimal rounding (plus 5e-5 for PyTorch's float32);
      * token ids are used as given: adding [CLS]/[SEP] changes the vector, and the vector of a
        text does not depend on other texts (no state).
    Returns {"triples": [(cos_related, cos_unrelated), ...], "published": [(cos, published),
    ...] (empty for other models), "pooling": mode}."""
    m = load(folder)
    tok = hf_tokenizer(folder)
    out = {"pooling": m.pooling, "triples": [], "published": []}
    for anchor, rel, unrel in SELF_CHECK_TRIPLES:
        ea, er, eu = (m.embed(tok.encode(s).ids) for s in (anchor, rel, unrel))
        for e in (ea, er, eu):
            assert e.shape == (m.n_embd,) and np.all(np.isfinite(e))
            assert abs(np.linalg.norm(e) - 1.0) < 1e-12
        c_rel, c_unrel = cosine(ea, er), cosine(ea, eu)
        out["triples"].append((c_rel, c_unrel))
        if verbose:
            print(f"cos({anchor!r}, {rel!r}) = {c_rel:.6f}")
            print(f"cos({anchor!r}, {unrel!r}) = {c_unrel:.6f}")
        assert c_rel > c_unrel + 0.1, (anchor, c_rel, c_unrel)
    if os.path.basename(os.path.normpath(folder)) == "all-MiniLM-L6-v2":
        for a, b, want in PUBLISHED_MINILM:
            got = cosine(m.embed(tok.encode(a).ids), m.embed(tok.encode(b).ids))
            out["published"].append((got, want))
            if verbose:
                print(f"cos({a!r}, {b!r}) = {got:.6f} (published {want:.4f})")
            assert abs(got - want) <= 1e-4, (a, b, got, want)
    ids = tok.encode(SELF_CHECK_TRIPLES[0][0]).ids
    assert ids[0] == tok.token_to_id("[CLS]") and ids[-1] == tok.token_to_id("[SEP]")
    bare = m.embed(ids[1:-1])
    assert cosine(bare, m.embed(ids)) < 1 - 1e-6, "special tokens had no effect"
    assert np.array_equal(m.embed(ids), m.embed(ids)), "not deterministic"
    return out


def _main(argv) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(os.environ.get("TRIAD_MODELS_DIR") or os.path.join(here, "..", "..", "models"),
                           "all-MiniLM-L6-v2")
    folder = argv[1] if len(argv) > 1 else default
    r = self_check(folder, verbose=True)
    print(f"pooling {r['pooling']}: self-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))

"""Golden test of nomic-bert (NomicBertModel, the architecture of nomic-embed-text v1 / v1.5):
a tiny random Hugging Face folder converted by `triad convert` and served by `triad serve` at
POST /v1/embeddings, against the independent numpy reference (tests/reference/nomic_bert_ref.py,
float64 over the *safetensors* weights) and PyPI tokenizers.

The folder: config.json with nomic-embed-text-v1.5's settings (rotary base 1000 over the whole
head, non-interleaved; swiglu; post-LayerNorm; no linear biases; 2 token types) at small sizes
(n_embd 64, 4 heads, 2 layers, n_inner 256: NomicBert's gated MLP rounds its width up to a
multiple of 256, so smaller values are not a checkpoint the modelling code could load),
model.safetensors with Nomic's tensor names, all-MiniLM-L6-v2's WordPiece tokenizer files (30522
tokens, as nomic-embed-text uses bert-base-uncased's vocabulary), and sentence-transformers'
modules.json + 1_Pooling (mean) + Normalize. Random weights (seeded, ~0.08 scale).

Checked:
  * the GGUF (PyPI gguf): llama.cpp's nomic-bert layout: architecture "nomic-bert", rope.freq_base
    1000, non-causal, mean pooling, the sizes, BERT tokenizer; exactly llama.cpp's tensor names
    (fused attn_qkv [E, 3E] in GGUF dims, ffn_up = fc11, ffn_gate = fc12, no position_embd), each
    holding the checkpoint's values bitwise (F32);
  * tokenizer: POST /tokenize ids equal PyPI tokenizers' for every text;
  * numerics: 20 varied texts of 3 to ~300 tokens (positions matter with RoPE): cosine >= 0.99999
    with the reference, unit length, usage = the token count;
  * batching: 8 texts in one request equal, bitwise, the same texts alone;
  * nomic-embed-text-v1.5's own config.json values (n_positions 8192 with max_trained_positions
    2048, vocab_size 30528 = 30522 padded to a multiple of 64, and its other keys) convert: context
    2048 (what llama.cpp writes: the trained length), the padded table kept, same embeddings;
  * settings outside that definition (interleaved rotary, gelu, prenorm, partial rotary, biases,
    xPos scale base, causal) are conversion errors naming the setting, leaving no file;
  * the reference's own self-check (no binary).

Skips: TRIAD_BIN unset (the parts that run the binary), or the tokenizer source missing
($TRIAD_MODELS_DIR/all-MiniLM-L6-v2, default <repo>/models). Runtime: seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import golden_util as gu  # puts tests/reference on sys.path
import bert_ref  # noqa: E402
import nomic_bert_ref  # noqa: E402
from embedding_corpus import _long_text, _mixed_long
from test_embeddings import Server, embeddings

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors.numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
ARCH = "nomic-bert"
E, H, L, N_INNER = 64, 4, 2, 256
N_VOCAB = 30522
COS_MIN = 0.99999
BATCH = 8
SEED = 20240

SHORT_TEXTS = [
    "search_query: What is TSNE?",
    "hello",
    "A man is eating a piece of bread.",
    "The quick brown fox jumps over the lazy dog.",
    "Le café était très bon; naïve façade, résumé.",
    "東京は日本の首都です。北京是中国的首都。",
    "Thumbs up 👍🏽 and a family 👨‍👩‍👧‍👦!",
    "Call +1 (555) 123-4567 on 2024-02-29T23:59:59Z, v1.2.3-rc.4",
    "def f(x):\n    return x ** 2  # square",
    "https://example.com/path/to/page?query=value&other=123#fragment",
    "multiple   spaces\tand\ttabs\n\nand newlines",
    "The capital of France is [MASK]. [SEP] inside",
    "x y",
    "ΑΘΗΝΑ ΟΔΟΣ Σοφία σοφός ς, Русский текст: Съешь же ещё",
]
LONG_TARGETS = [(1, 64), (2, 128), (3, 192), (4, 256), (5, 300)]  # (seed, at most this many tokens)
MIXED_TARGET = (6, 280)


# ----------------------------------------------------------------------------------------------
# The folder
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm_dir():
    d = os.path.join(os.environ.get("TRIAD_MODELS_DIR") or os.path.join(REPO, "models"), "all-MiniLM-L6-v2")
    if not os.path.exists(os.path.join(d, "tokenizer.json")):
        pytest.skip(f"{d} missing (its WordPiece tokenizer files are the test model's)")
    return d


def nomic_config(**over) -> dict:
    return nomic_bert_ref.tiny_config(**{"n_embd": E, "n_layer": L, "n_head": H, "n_inner": N_INNER,
                                         "vocab_size": N_VOCAB, **over})


def make_nomic_folder(path, minilm_dir: str, seed: int, cfg: dict | None = None) -> dict:
    """A random NomicBertModel folder; returns {"dir", "cfg", "w"} (float32 weights, HF names)."""
    from safetensors.numpy import save_file

    cfg = cfg or nomic_config()
    os.makedirs(path, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(minilm_dir, f)):
            shutil.copy(os.path.join(minilm_dir, f), os.path.join(path, f))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    w = nomic_bert_ref.random_weights(cfg, seed)
    save_file(w, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], f)
    os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": E, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                   "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False}, f)
    with open(os.path.join(path, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 8192, "do_lower_case": False}, f)
    return {"dir": str(path), "cfg": cfg, "w": w}


@pytest.fixture(scope="module")
def nomic(minilm_dir, tmp_path_factory):
    return make_nomic_folder(tmp_path_factory.mktemp("nomic") / "hf", minilm_dir, SEED)


@pytest.fixture(scope="module")
def tok(nomic):
    return bert_ref.hf_tokenizer(nomic["dir"])


def _trim(tok, text: str, n: int) -> str:
    """The longest prefix (in words) of text with at most n tokens ([CLS] and [SEP] included)."""
    words = text.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tok.encode(" ".join(words[:mid])).ids) <= n:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


@pytest.fixture(scope="module")
def texts(tok):
    long_ = [_trim(tok, _long_text(seed, 400), n) for seed, n in LONG_TARGETS]
    long_.append(_trim(tok, _mixed_long(MIXED_TARGET[0], 400), MIXED_TARGET[1]))
    return SHORT_TEXTS + long_


@pytest.fixture(scope="module")
def hf_ids(tok, texts):
    return [tok.encode(t).ids for t in texts]


# ----------------------------------------------------------------------------------------------
# No binary needed
# ----------------------------------------------------------------------------------------------

def test_reference_self_check():
    r = nomic_bert_ref.self_check()
    assert r["vectorized_vs_scalar"] < 1e-10


def test_folder_and_texts(nomic, texts, hf_ids):
    """The folder is what NomicBertModel loads (the reference checks every name and shape), the
    pooling is mean, and the texts reach ~300 tokens."""
    ref = nomic_bert_ref.NomicBertRef.from_folder(nomic["dir"])
    assert ref.pooling == "mean" and ref.normalize
    assert ref.n_ff == N_INNER and ref.n_vocab == N_VOCAB
    n = [len(ids) for ids in hf_ids]
    assert len(texts) == 20 and min(n) >= 3
    assert 290 <= max(n) <= 300 and sum(k > 100 for k in n) >= 5, n
    e = ref.embed(hf_ids[-1])
    assert abs(np.linalg.norm(e) - 1) < 1e-12


# ----------------------------------------------------------------------------------------------
# Conversion
# ----------------------------------------------------------------------------------------------

def convert(folder, out) -> subprocess.CompletedProcess:
    return subprocess.run([gu.require("convert"), "convert", str(folder), "-o", str(out), "--outtype", "f32"],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def gguf_f32(nomic, tmp_path_factory):
    out = tmp_path_factory.mktemp("nomic-gguf") / "nomic-f32.gguf"
    p = convert(nomic["dir"], out)
    assert p.returncode == 0, p.stderr
    assert f"{ARCH}," in p.stdout, p.stdout
    return str(out)


def test_gguf_metadata_and_tensors(gguf_f32, nomic, hf_ids):
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(gguf_f32)
    md = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    a = ARCH
    assert md.get("general.architecture") == a
    assert md.get(f"{a}.rope.freq_base") == 1000.0
    assert md.get(f"{a}.attention.causal") is False
    assert md.get(f"{a}.pooling_type") == 1, "mean pooling (llama.cpp's LLAMA_POOLING_TYPE_MEAN)"
    assert md.get(f"{a}.embedding_length") == E
    assert md.get(f"{a}.block_count") == L
    assert md.get(f"{a}.attention.head_count") == H
    assert md.get(f"{a}.feed_forward_length") == N_INNER
    assert abs(md.get(f"{a}.attention.layer_norm_epsilon", 0) - 1e-12) <= 1e-18
    assert md.get(f"{a}.context_length", 0) >= max(len(ids) for ids in hf_ids)
    assert md.get("tokenizer.ggml.model") == "bert"
    assert len(md.get("tokenizer.ggml.tokens", [])) == N_VOCAB
    tensors = {t.name: t for t in r.tensors}
    want = {"token_embd.weight": [E, N_VOCAB], "token_types.weight": [E, 2], "token_embd_norm.weight": [E],
            "token_embd_norm.bias": [E]}
    for i in range(L):
        b = f"blk.{i}."
        want.update({b + "attn_qkv.weight": [E, 3 * E], b + "attn_output.weight": [E, E],
                     b + "attn_output_norm.weight": [E], b + "attn_output_norm.bias": [E],
                     b + "ffn_up.weight": [E, N_INNER], b + "ffn_gate.weight": [E, N_INNER],
                     b + "ffn_down.weight": [N_INNER, E],
                     b + "layer_output_norm.weight": [E], b + "layer_output_norm.bias": [E]})
    assert set(tensors) == set(want), f"extra {sorted(set(tensors) - set(want))}, missing {sorted(set(want) - set(tensors))}"
    assert not any("position" in n for n in tensors)
    for name, shape in want.items():
        assert [int(d) for d in tensors[name].shape] == shape, (name, list(tensors[name].shape), shape)
    kinds = {gguf.GGMLQuantizationType(int(t.tensor_type)).name for t in r.tensors}
    assert kinds == {"F32"}, f"--outtype f32 wrote {kinds}"
    # Each tensor holds its checkpoint tensor's values (numpy order: GGUF dims reversed = HF's).
    w = nomic["w"]
    same = {"token_embd.weight": "embeddings.word_embeddings.weight", "token_types.weight": "embeddings.token_type_embeddings.weight",
            "token_embd_norm.weight": "emb_ln.weight", "token_embd_norm.bias": "emb_ln.bias"}
    for i in range(L):
        b, p = f"blk.{i}.", f"encoder.layers.{i}."
        same.update({b + "attn_qkv.weight": p + "attn.Wqkv.weight", b + "attn_output.weight": p + "attn.out_proj.weight",
                     b + "attn_output_norm.weight": p + "norm1.weight", b + "attn_output_norm.bias": p + "norm1.bias",
                     b + "ffn_up.weight": p + "mlp.fc11.weight", b + "ffn_gate.weight": p + "mlp.fc12.weight",
                     b + "ffn_down.weight": p + "mlp.fc2.weight",
                     b + "layer_output_norm.weight": p + "norm2.weight", b + "layer_output_norm.bias": p + "norm2.bias"})
    for g, h in same.items():
        got = np.asarray(tensors[g].data).reshape(w[h].shape)
        assert np.array_equal(got, w[h]), f"{g} does not hold {h}"


# ----------------------------------------------------------------------------------------------
# Serving
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(gguf_f32):
    s = Server(["-m", gguf_f32, "--alias", "nomic"])
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-30:])


@pytest.fixture(scope="module")
def singles(server, hf_ids, texts):
    """float32 embedding of each text in a single-input request (base64), usage checked."""
    out = []
    for i, t in enumerate(texts):
        e, usage = embeddings(server, [t], model="nomic")
        assert e.shape == (1, E), (i, e.shape)
        assert usage["prompt_tokens"] == len(hf_ids[i]), (i, usage, len(hf_ids[i]))
        out.append(e[0])
    return out


def test_tokenize_matches_tokenizers(server, texts, hf_ids):
    bad = []
    for i, text in enumerate(texts):
        status, body = server.post("/tokenize", {"model": "nomic", "prompt": text, "add_special_tokens": True})
        assert status == 200, (i, body)
        if body["tokens"] != hf_ids[i]:
            bad.append(f"[{i}] {text[:50]!r}: triad {body['tokens'][:20]}, tokenizers {hf_ids[i][:20]}")
    assert not bad, "\n".join(bad)


def test_embeddings_match_reference(nomic, texts, hf_ids, singles):
    ref = nomic_bert_ref.load(nomic["dir"])
    cos = []
    for i, got in enumerate(singles):
        got = got.astype(np.float64)
        assert np.all(np.isfinite(got)), i
        assert abs(np.linalg.norm(got) - 1.0) <= 1e-5, (i, np.linalg.norm(got))
        cos.append(nomic_bert_ref.cosine(got, ref.embed(hf_ids[i])))
    worst = int(np.argmin(cos))
    summary = (f"min cosine {cos[worst]:.8f} (1 - cos = {1 - cos[worst]:.2e}) at [{worst}] ({len(hf_ids[worst])} tokens, {texts[worst][:40]!r}), "
               f"mean {np.mean(cos):.8f} over {len(cos)} texts")
    print(summary)
    assert cos[worst] >= COS_MIN, summary + "\n" + "\n".join(
        f"[{i}] {len(hf_ids[i])} tokens: {c:.8f}" for i, c in enumerate(cos))


def test_batch_equals_alone(server, texts, hf_ids, singles):
    pick = [0, 14, 3, 18, 6, 19, 9, 16]  # short and long mixed
    assert len(pick) == BATCH
    got, usage = embeddings(server, [texts[i] for i in pick], model="nomic")
    assert got.shape == (BATCH, E)
    assert usage["prompt_tokens"] == sum(len(hf_ids[i]) for i in pick), usage
    for row, i in zip(got, pick):
        assert np.array_equal(row, singles[i]), f"[{i}] differs in a batch: max |d| {np.abs(row - singles[i]).max():.3g}"


def test_nomic_embed_text_v15_config(minilm_dir, tmp_path):
    """nomic-embed-text-v1.5's config.json as published (n_positions 8192, max_trained_positions
    2048, vocab_size 30528 = 30522 padded to a multiple of 64, and its other keys): converts with
    context 2048 (the trained length, as llama.cpp writes), keeps the padded word table, and serves
    the reference's embeddings."""
    gguf = pytest.importorskip("gguf")
    cfg = nomic_config(n_positions=8192, max_trained_positions=2048, vocab_size=30528, pad_vocab_size_multiple=64,
                       rotary_scaling_factor=None, attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0,
                       summary_first_pdrop=0.0, bos_token_id=None, eos_token_id=None, dense_seq_output=True,
                       fused_bias_fc=True, fused_dropout_add_ln=True, initializer_range=0.02, parallel_block=False,
                       parallel_block_tied_norm=False, reorder_and_upcast_attn=False, scale_attn_by_inverse_layer_idx=False,
                       scale_attn_weights=True, use_cache=True, use_flash_attn=True, use_rms_norm=False,
                       use_xentropy=True, torch_dtype="float32", transformers_version="4.34.0",
                       auto_map={"AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig",
                                 "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"})
    m = make_nomic_folder(tmp_path / "hf", minilm_dir, SEED + 1, cfg)
    out = tmp_path / "v15.gguf"
    p = convert(m["dir"], out)
    assert p.returncode == 0, p.stderr
    r = gguf.GGUFReader(str(out))
    assert r.fields[f"{ARCH}.context_length"].contents() == 2048
    t = {t.name: t for t in r.tensors}["token_embd.weight"]
    assert [int(d) for d in t.shape] == [E, 30528]
    tok = bert_ref.hf_tokenizer(m["dir"])
    ref = nomic_bert_ref.load(m["dir"])
    sample = [SHORT_TEXTS[0], SHORT_TEXTS[5], _long_text(9, 120)]
    s = Server(["-m", str(out), "--alias", "nomic"])
    try:
        got, _ = embeddings(s, sample, model="nomic")
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])
    for g, text in zip(got, sample):
        c = nomic_bert_ref.cosine(g, ref.embed(tok.encode(text).ids))
        assert c >= COS_MIN, (text[:40], c)


# ----------------------------------------------------------------------------------------------
# Settings outside the definition
# ----------------------------------------------------------------------------------------------

def _expect_refused(minilm_dir, tmp_path, over: dict, needle: str):
    m = make_nomic_folder(tmp_path / "hf", minilm_dir, SEED + 2)
    with open(os.path.join(m["dir"], "config.json"), "w") as f:
        json.dump({**m["cfg"], **over}, f)
    out = tmp_path / "bad.gguf"
    p = convert(m["dir"], out)
    assert p.returncode != 0, f"{over} was converted:\n{p.stdout}"
    assert needle in p.stderr, (over, p.stderr)
    assert not out.exists()


@pytest.mark.parametrize("over", [{"rotary_emb_interleaved": True}, {"activation_function": "gelu"}],
                         ids=["interleaved", "gelu"])
def test_unsupported_settings_are_clear_errors(minilm_dir, tmp_path, over):
    _expect_refused(minilm_dir, tmp_path, over, next(iter(over)))


EXTRA_REFUSED = [  # what llama.cpp's converter asserts for nomic-bert (v1 / v1.5) besides the two above
    {"prenorm": True}, {"rotary_emb_fraction": 0.5}, {"qkv_proj_bias": True}, {"mlp_fc1_bias": True},
    {"rotary_emb_scale_base": 512}, {"causal": True},
]


@pytest.mark.parametrize("over", EXTRA_REFUSED, ids=[next(iter(o)) for o in EXTRA_REFUSED])
def test_other_unsupported_settings_are_clear_errors(minilm_dir, tmp_path, over):
    _expect_refused(minilm_dir, tmp_path, over, next(iter(over)))

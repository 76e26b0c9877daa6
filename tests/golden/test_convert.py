"""`triad convert` (issue 15): a Hugging Face folder to GGUF.

Tiny random models are written as Hugging Face folders with PyPI `safetensors`, `tokenizers` and
numpy (no torch): config.json, model.safetensors (or two shards with an index), tokenizer.json (a
byte-level BPE trained here with Qwen2's or Llama 3's split pattern, plus special tokens) and
tokenizer_config.json. Each is converted, and:
  * the logits Triad computes on the GGUF equal an independent numpy forward pass written from
    the Hugging Face modelling code over the *safetensors* weights (rotate-half RoPE, grouped
    attention, SwiGLU, Qwen2's q/k/v biases, Qwen3's q/k RMS norms, tied or untied head), so the
    metadata, the tensor mapping and llama's q/k row permutation are what llama.cpp's converter
    writes;
  * Triad's tokenizer on the GGUF gives the token ids PyPI `tokenizers` gives on tokenizer.json
    for varied texts (punctuation, accents, CJK, emoji, digits, whitespace runs, special tokens);
  * real vocabularies (llama.cpp's GPT-2, Qwen2 and Llama 3 test GGUFs) written as tokenizer.json
    and converted back tokenize llama.cpp's test vectors exactly;
  * bad folders (unknown architecture, a missing or misshapen tensor, an unsupported tokenizer)
    are clear errors, and no output file is left behind.
"""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import golden_util as gu
from ref_model import attention, gelu_tanh, rms_norm, rope, silu

tokenizers = pytest.importorskip("tokenizers")
st_numpy = pytest.importorskip("safetensors.numpy")

QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "Once upon a time there was a little robot who loved to count: 1, 2, 3, 12345, 3.14159!",
    "Le café était très bon; naïve façade, résumé, Ærøskøbing and Straße.",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Emoji 😀🎉👍🏽 and symbols ©®™ ±×÷ → ⇒ ∀∃ ∑∏.",
    "def f(x):\n    return x ** 2  # square\n\n\tindented\ttabs   and    spaces",
    "It's, they're, we've, I'm, you'll, he'd — contractions. URLs: https://example.com/a?b=c&d=e",
] * 3
TEXTS = [
    "Hello world", " leading space", "trailing space ", "multiple   spaces\n\n\nnewlines", "12345678901234567890",
    "café naïve", "日本語のテキスト", "emoji 🎉 party", "mixed: abc123 ÀÉÎ 中文 😀!?", "<|im_start|>user\nhi<|im_end|>",
    "tabs\tand\r\ncarriage returns", "don't won't can't", "a" * 50, "   ", "\n", "x<|endoftext|>y",
    "The quick brown fox jumps over the lazy dog.", "ÆØÅ æøå ß ẞ", "Ελληνικά κείμενα", "русский текст",
]


def make_tokenizer(split: str, vocab_size: int) -> "tokenizers.Tokenizer":
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.add_special_tokens(SPECIALS)
    return tok


META = "\u2581"  # SentencePiece's space


def spm_tokenizer(vocab: dict, merges: list, style: str, specials=(), unk: str = "<unk>") -> "tokenizers.Tokenizer":
    """A SentencePiece BPE tokenizer in the tokenizer.json form Hugging Face writes: model BPE with
    byte fallback; style "llama" (Llama 2 / Mistral: Prepend("▁") + Replace(" ", "▁")) or "gemma"
    (Replace(" ", "▁") and its no-op Split on " "). specials: (text, special) added tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: F401
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, byte_fallback=True, fuse_unk=True))
    if style == "llama":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)])
        tail = [decoders.Strip(" ", 1, 0)]
    else:
        tok.normalizer = normalizers.Replace(" ", META)
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        tail = []
    tok.decoder = decoders.Sequence([decoders.Replace(META, " "), decoders.ByteFallback(), decoders.Fuse()] + tail)
    tok.add_tokens([AddedToken(t, special=sp, normalized=False) for t, sp in specials])
    return tok


def make_spm_tokenizer(style: str) -> "tokenizers.Tokenizer":
    """A small SentencePiece-style BPE trained here: <pad> <eos> <bos> <unk>, the 256 byte pieces,
    then the learned pieces (text with spaces as "▁"); characters it never saw fall back to bytes."""
    from tokenizers import Tokenizer, models, normalizers, trainers
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.Replace(" ", META)
    t.train_from_iterator(CORPUS, trainer=trainers.BpeTrainer(vocab_size=300, show_progress=False))
    tj = json.loads(t.to_str())
    learned = sorted(tj["model"]["vocab"], key=tj["model"]["vocab"].get)
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in tj["model"]["merges"]]
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + learned
    vocab = {p: i for i, p in enumerate(pieces)}
    specials = [(p, True) for p in pieces[:4]] + [("<start_of_turn>", True), ("<end_of_turn>", True)]
    return spm_tokenizer(vocab, merges, style, specials)


def make_folder(path, arch: str, seed: int, shards: bool = False, tied: bool = False, n_vocab_pad: int = 0,
                multimodal: bool = False, gemma_27b: bool = False) -> dict:
    """A random HF folder; returns its config and weights (float32, HF names). gemma3: six layers
    (five sliding-window, one global), a window of 8 and a SentencePiece tokenizer; multimodal:
    as Gemma3ForConditionalGeneration lays it out (text_config, language_model.*, a vision tower);
    gemma_27b: 62 layers with query_pre_attn_scalar = hidden / heads (16) apart from head_dim (24),
    as Gemma 3 27B has them."""
    rng = np.random.default_rng(seed)
    os.makedirs(path, exist_ok=True)
    gemma = arch == "gemma3"
    tok = make_spm_tokenizer("gemma") if gemma else make_tokenizer(LLAMA3_SPLIT if arch == "llama" else QWEN2_SPLIT, 400)
    tok.save(os.path.join(path, "tokenizer.json"))
    n_tok = tok.get_vocab_size()
    hidden, n_layer, n_head, n_kv, ff = 64, (62 if gemma_27b else 6) if gemma else 2, 4, 2, 96
    head_dim = 24 if arch == "qwen3" or gemma_27b else 16  # qwen3: head_dim given apart from hidden / heads
    cfg = {
        "architectures": {"qwen2": ["Qwen2ForCausalLM"], "qwen3": ["Qwen3ForCausalLM"], "llama": ["LlamaForCausalLM"],
                          "gemma3": ["Gemma3ForCausalLM"]}[arch],
        "hidden_size": hidden, "num_hidden_layers": n_layer, "num_attention_heads": n_head,
        "num_key_value_heads": n_kv, "intermediate_size": ff, "vocab_size": n_tok + n_vocab_pad,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0 if arch == "llama" else 1e6,
        "tie_word_embeddings": tied, "bos_token_id": n_tok - 3, "eos_token_id": n_tok - 1,
    }
    if arch == "qwen3":
        cfg["head_dim"] = head_dim
    if gemma:  # as google/gemma-3-270m's config.json has it
        cfg.update({"head_dim": head_dim, "query_pre_attn_scalar": hidden // n_head if gemma_27b else head_dim,
                    "sliding_window": 8, "rope_theta": 1e6,
                    "rope_local_base_freq": 10000.0, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
                    "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n_layer)],
                    "final_logit_softcapping": None, "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1})
    file_cfg = cfg
    if multimodal:
        file_cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                    "text_config": {k: v for k, v in cfg.items() if k != "architectures"},
                    "vision_config": {"hidden_size": 8}, "mm_tokens_per_image": 4}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(file_cfg, f)
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        if gemma:
            json.dump({"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": True, "add_eos_token": False,
                       "chat_template": "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
                                        "<end_of_turn>\n{% endfor %}"}, f)
        else:
            json.dump({"eos_token": "<|im_end|>", "add_bos_token": False,
                       "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}, f)
    V = cfg["vocab_size"]
    w = {}

    def mat(name, *shape, scale=0.08):
        w[name] = (rng.standard_normal(shape) * scale).astype(np.float32)

    mat("model.embed_tokens.weight", V, hidden, scale=0.5)
    norm0 = 0.0 if gemma else 1.0  # gemma's norms scale by 1 + w
    for i in range(n_layer):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = (norm0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        w[p + "post_attention_layernorm.weight"] = (norm0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        if gemma:
            w[p + "pre_feedforward_layernorm.weight"] = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
            w[p + "post_feedforward_layernorm.weight"] = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
        mat(p + "self_attn.q_proj.weight", n_head * head_dim, hidden)
        mat(p + "self_attn.k_proj.weight", n_kv * head_dim, hidden)
        mat(p + "self_attn.v_proj.weight", n_kv * head_dim, hidden)
        mat(p + "self_attn.o_proj.weight", hidden, n_head * head_dim)
        if arch == "qwen2":
            for k, n in (("q", n_head), ("k", n_kv), ("v", n_kv)):
                mat(p + f"self_attn.{k}_proj.bias", n * head_dim, scale=0.2)
        if arch in ("qwen3", "gemma3"):
            w[p + "self_attn.q_norm.weight"] = (norm0 + 0.1 * rng.standard_normal(head_dim)).astype(np.float32)
            w[p + "self_attn.k_norm.weight"] = (norm0 + 0.1 * rng.standard_normal(head_dim)).astype(np.float32)
        mat(p + "mlp.gate_proj.weight", ff, hidden)
        mat(p + "mlp.up_proj.weight", ff, hidden)
        mat(p + "mlp.down_proj.weight", hidden, ff)
    w["model.norm.weight"] = (norm0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
    if not tied and not gemma:
        mat("lm_head.weight", V, hidden)
    ref_w = w
    if multimodal:  # the text model under language_model., beside a vision tower that is not converted
        w = {"language_model." + k: v for k, v in w.items()}
        w["vision_tower.vision_model.embeddings.patch_embedding.weight"] = rng.standard_normal((8, 3, 2, 2)).astype(np.float32)
        w["multi_modal_projector.mm_input_projection_weight"] = rng.standard_normal((8, hidden)).astype(np.float32)
    if shards:
        names = sorted(w)
        half = len(names) // 2
        files = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
        for fname, ns in files.items():
            st_numpy.save_file({n: w[n] for n in ns}, os.path.join(path, fname))
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": {n: fn for fn, ns in files.items() for n in ns}}, f)
    else:
        st_numpy.save_file(w, os.path.join(path, "model.safetensors"))
    return {"cfg": cfg, "w": ref_w, "arch": arch, "head_dim": head_dim, "tok": tok}


def hf_forward(m: dict, tokens) -> np.ndarray:
    """Logits [T, V] as the Hugging Face modelling code computes them (float64)."""
    cfg, w, arch, hd = m["cfg"], {k: v.astype(np.float64) for k, v in m["w"].items()}, m["arch"], m["head_dim"]
    n_head, n_kv, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    T = len(tokens)
    pos = np.arange(T)
    x = w["model.embed_tokens.weight"][np.asarray(tokens)]
    if arch == "gemma3":
        return gemma3_forward(cfg, w, hd, x)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        if arch == "qwen2":
            q, k, v = q + w[p + "self_attn.q_proj.bias"], k + w[p + "self_attn.k_proj.bias"], v + w[p + "self_attn.v_proj.bias"]
        q, k, v = q.reshape(T, n_head, hd), k.reshape(T, n_kv, hd), v.reshape(T, n_kv, hd)
        if arch == "qwen3":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        # HF's rotate_half: pairs (i, i + D/2): the "neox" layout.
        q = rope(q, pos, hd, cfg["rope_theta"], "neox")
        k = rope(k, pos, hd, cfg["rope_theta"], "neox")
        a = attention(q, k, v, pos, pos, 1.0 / np.sqrt(hd)).reshape(T, n_head * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + g @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def gemma3_forward(cfg: dict, w: dict, hd: int, x: np.ndarray) -> np.ndarray:
    """Gemma 3's text model as transformers' Gemma3ForCausalLM computes it: embeddings times
    sqrt(hidden); RMS norms that scale by (1 + w); q / k RMS-normed per head; rotate-half RoPE
    with base 10000 on sliding-window layers and rope_theta on full ones; scores scaled by
    query_pre_attn_scalar^-1/2; a key j is seen from i when i - window < j <= i on sliding layers;
    norms after attention and on both sides of the GELU (tanh) MLP; a tied head."""
    n_head, n_kv, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    T = x.shape[0]
    pos = np.arange(T)

    def norm(v, name):
        return rms_norm(v, 1.0 + w[name], eps)

    x = x * np.sqrt(cfg["hidden_size"])
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        local = cfg["layer_types"][i] == "sliding_attention"
        h = norm(x, p + "input_layernorm.weight")
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, n_head, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, n_kv, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, n_kv, hd)
        q, k = norm(q, p + "self_attn.q_norm.weight"), norm(k, p + "self_attn.k_norm.weight")
        base = cfg["rope_local_base_freq"] if local else cfg["rope_theta"]
        q, k = rope(q, pos, hd, base, "neox"), rope(k, pos, hd, base, "neox")
        a = attention(q, k, v, pos, pos, cfg["query_pre_attn_scalar"] ** -0.5, window=cfg["sliding_window"] if local else 0)
        x = x + norm(a.reshape(T, n_head * hd) @ w[p + "self_attn.o_proj.weight"].T, p + "post_attention_layernorm.weight")
        h = norm(x, p + "pre_feedforward_layernorm.weight")
        g = gelu_tanh(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + norm(g @ w[p + "mlp.down_proj.weight"].T, p + "post_feedforward_layernorm.weight")
    x = norm(x, "model.norm.weight")
    return x @ w["model.embed_tokens.weight"].T


def convert(folder, out, outtype="f32"):
    return subprocess.run([gu.require("convert"), "convert", str(folder), "-o", str(out), "--outtype", outtype],
                          capture_output=True, text=True, timeout=300)


CASES = [("qwen2", dict()), ("qwen3", dict(tied=True)), ("llama", dict(shards=True, n_vocab_pad=5)), ("gemma3", dict()),
         ("gemma3", dict(multimodal=True, n_vocab_pad=3)), ("gemma3", dict(gemma_27b=True))]


@pytest.mark.parametrize("arch,kw", CASES, ids=[c[0] + ("-multimodal" if c[1].get("multimodal") else "") +
                                                ("-27b-shape" if c[1].get("gemma_27b") else "") for c in CASES])
def test_converted_model_matches_the_hf_definition(tmp_path, arch, kw):
    m = make_folder(tmp_path / "hf", arch, seed=len(arch), **kw)
    out = tmp_path / "model.gguf"
    p = convert(tmp_path / "hf", out)
    assert p.returncode == 0, p.stderr
    assert f"{arch}," in p.stdout
    tokens = list(np.random.default_rng(5).integers(0, m["cfg"]["vocab_size"], 24))
    got = gu.eval_logits(str(out), tokens, m["cfg"]["vocab_size"])
    ref = hf_forward(m, tokens)
    err = np.abs(got - ref).max() / max(1.0, np.abs(ref).max())
    assert err < 1e-4, f"{arch}: max relative error {err:.2e}"
    # F16 output: the same within F16 weight rounding.
    out16 = tmp_path / "model-f16.gguf"
    assert convert(tmp_path / "hf", out16, "f16").returncode == 0
    got16 = gu.eval_logits(str(out16), tokens, m["cfg"]["vocab_size"])
    assert np.abs(got16 - ref).max() / max(1.0, np.abs(ref).max()) < 2e-2
    assert os.path.getsize(out16) < os.path.getsize(out)


@pytest.mark.parametrize("arch", ["qwen2", "llama", "gemma3"])
def test_converted_tokenizer_matches_tokenizers(tmp_path, arch):
    """gemma3's folder has a SentencePiece BPE tokenizer (byte fallback, spaces as "▁", BOS added)."""
    m = make_folder(tmp_path / "hf", arch, seed=3)
    out = tmp_path / "model.gguf"
    p = convert(tmp_path / "hf", out)
    assert p.returncode == 0, p.stderr
    tok = m["tok"]
    bos = [m["cfg"]["bos_token_id"]] if arch == "gemma3" else []
    for text in TEXTS + CORPUS[:6] + ["<start_of_turn>user\nhi<end_of_turn>\n", "  two leading", "\u00e9\u0301 \U0001F600x"]:
        want = bos + tok.encode(text).ids
        got = gu.tokenize(str(out), text)
        assert got == want, f"{text!r}: triad {got} vs tokenizers {want}"


def proto_fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message: varints as int, length-delimited
    as bytes, fixed32 / fixed64 as bytes (enough for SentencePiece's ModelProto)."""
    i = 0

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < len(buf):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            yield num, wt, varint()
        elif wt == 2:
            n = varint()
            yield num, wt, buf[i:i + n]
            i += n
        elif wt == 5:
            yield num, wt, buf[i:i + 4]
            i += 4
        elif wt == 1:
            yield num, wt, buf[i:i + 8]
            i += 8
        else:
            raise ValueError(f"wire type {wt}")


def unigram_model():
    """A SentencePiece Unigram model trained here (nmt_nfkc normalization: a real precompiled
    charsmap; XLM-R's special ids <s> 0, <pad> 1, </s> 2, <unk> 3), as (processor, tokenizer.json)
    with tokenizer.json written the way Hugging Face's converter writes XLM-R's."""
    import base64
    import io
    spm = pytest.importorskip("sentencepiece")
    lines = [ln for t in CORPUS + TEXTS for ln in t.split("\n") if ln.strip()] * 4
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=300, model_type="unigram",
                                   normalization_rule_name="nmt_nfkc", character_coverage=0.98, bos_id=0, pad_id=1,
                                   eos_id=2, unk_id=3, hard_vocab_limit=False, minloglevel=2)
    proto = buf.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    norm = next(v for num, wt, v in proto_fields(proto) if num == 3 and wt == 2)
    charsmap = next(v for num, wt, v in proto_fields(norm) if num == 2 and wt == 2)
    n = sp.get_piece_size()
    specials = {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>"}
    assert all(sp.id_to_piece(i) == t for i, t in specials.items())
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    seq = {"Sequence": {"id": "A", "type_id": 0}}
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in specials.items()],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": meta,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, seq, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, seq, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                                              "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        "decoder": meta,
        "model": {"type": "Unigram", "unk_id": 3, "byte_fallback": False,
                  "vocab": [[sp.id_to_piece(i), 0.0 if i in specials else sp.get_score(i)] for i in range(n)]},
    }
    return sp, tj


def test_unigram_tokenizer_matches_sentencepiece_and_tokenizers(tmp_path):
    """A Unigram tokenizer.json (XLM-R style: precompiled charsmap, merged whitespace, "▁" prefix,
    "<s> $A </s>") converts to llama.cpp's "t5" vocabulary, and Triad's ids equal SentencePiece's
    own (the model's ground truth) on every text, and PyPI tokenizers' on every text without
    leading or trailing whitespace (there tokenizers keeps a lone "▁" that SentencePiece drops)."""
    sp, tj = unigram_model()
    hf = tmp_path / "hf"
    hf.mkdir()
    n = sp.get_piece_size()
    tiny_weights(hf, n + 7)  # ids past the pieces: padding
    (hf / "tokenizer.json").write_text(json.dumps(tj))
    (hf / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    out = tmp_path / "model.gguf"
    p = convert(hf, out)
    assert p.returncode == 0, p.stderr
    hft = tokenizers.Tokenizer.from_str(json.dumps(tj))
    texts = TEXTS + CORPUS[:6] + [
        "  two leading", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３", "ﬁne ① ㍻ ™", "e\u0301 and \u00e9", "tab\there", "Zürich Ελλάδα 東京",
        "unseen glyphs ☃☃☃ ✈ end", "\u00a0nbsp\u00a0inside\u00a0", "x" * 40 + " y", "",
    ]
    score = lambda ids: sum(sp.get_score(i) for i in ids)  # noqa: E731
    ties = 0
    for text in texts:
        want_sp = [0] + sp.encode(text) + [2]
        got = triad_ids(str(out), text, bos=True)
        if got != want_sp:
            # SentencePiece sums scores in float, Triad (as llama.cpp) in double: where two
            # segmentations tie, rounding may pick the other one. Both must be optimal.
            assert abs(score(got) - score(want_sp)) < 1e-4 and sp.decode(got) == sp.decode(want_sp), \
                f"{text!r}: triad {got} vs sentencepiece {want_sp}"
            ties += 1
        if text == text.strip() and text:
            want_hf = hft.encode(text).ids
            assert got == want_hf, f"{text!r}: triad {got} vs tokenizers {want_hf}"
    assert ties <= 2, f"{ties} texts tokenized differently (equal scores) from SentencePiece"
    # Settings Triad does not implement are named, not guessed.
    for bad, msg in [({"type": "NFKC"}, "normalizer"), ({"type": "Precompiled", "precompiled_charsmap": "@@"}, "not base64")]:
        tj2 = dict(tj, normalizer=bad)
        (hf / "tokenizer.json").write_text(json.dumps(tj2))
        p = convert(hf, tmp_path / "bad.gguf")
        assert p.returncode != 0 and msg in p.stderr, p.stderr
        assert not (tmp_path / "bad.gguf").exists()
    # Special tokens in the text are cut out first; each piece of text around them is its own.
    assert triad_ids(str(out), "a</s>b", special=True) == sp.encode("a") + [2] + sp.encode("b")


def test_bad_folders_are_clear_errors(tmp_path):
    m = make_folder(tmp_path / "hf", "qwen2", seed=1)
    src = tmp_path / "hf"
    out = tmp_path / "out.gguf"

    def expect(needle):
        p = convert(src, out)
        assert p.returncode != 0 and needle in p.stderr, p.stderr
        assert not out.exists()

    cfg = dict(m["cfg"])
    with open(src / "config.json", "w") as f:
        json.dump({**cfg, "architectures": ["GPTNeoXForCausalLM"]}, f)
    expect("'GPTNeoXForCausalLM' is not supported")
    for bad in ({"vocab_size": 10**9}, {"num_attention_heads": 694428065361, "num_key_value_heads": 694428065361, "head_dim": 26563938},
                {"num_hidden_layers": 10**12}):
        with open(src / "config.json", "w") as f:
            json.dump({**cfg, **bad}, f)
        expect("beyond what Triad converts")
    with open(src / "config.json", "w") as f:
        json.dump({**cfg, "vocab_size": cfg["vocab_size"] - 1}, f)
    expect("model.embed_tokens.weight is misshapen")
    with open(src / "config.json", "w") as f:
        json.dump({**cfg, "intermediate_size": 100}, f)
    expect("config.json implies")
    with open(src / "config.json", "w") as f:
        json.dump(cfg, f)
    w = dict(m["w"])
    del w["model.layers.1.mlp.up_proj.weight"]
    st_numpy.save_file(w, str(src / "model.safetensors"))
    expect("'model.layers.1.mlp.up_proj.weight' is missing")
    w = dict(m["w"])
    w["model.layers.0.extra.weight"] = np.zeros(4, dtype=np.float32)
    st_numpy.save_file(w, str(src / "model.safetensors"))
    expect("'model.layers.0.extra.weight' is not part of the qwen2 layout")
    st_numpy.save_file(m["w"], str(src / "model.safetensors"))
    tj = json.loads((src / "tokenizer.json").read_text())
    tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\w+"
    (src / "tokenizer.json").write_text(json.dumps(tj))
    expect("is not one Triad recognises yet")
    tj["model"]["type"] = "Unigram"
    (src / "tokenizer.json").write_text(json.dumps(tj))
    expect("the Unigram tokenizer.json has no vocab list")
    tj["model"]["type"] = "WordLevel"
    (src / "tokenizer.json").write_text(json.dumps(tj))
    expect("model 'WordLevel' is not supported")
    tj["model"]["type"] = "BPE"
    tj["pre_tokenizer"] = {"type": 7}
    (src / "tokenizer.json").write_text(json.dumps(tj))
    expect("malformed JSON file")


def test_gemma3_settings_triad_cannot_run_are_clear_errors(tmp_path):
    """What Triad's gemma3 hard-wires (as llama.cpp's does) is checked, not assumed: another layer
    pattern, attention scale, soft-capping, local RoPE base or activation is refused by name, as is
    a SentencePiece tokenizer.json with a normalizer Triad does not apply."""
    m = make_folder(tmp_path / "hf", "gemma3", seed=2)
    src, out = tmp_path / "hf", tmp_path / "out.gguf"
    cfg = m["cfg"]
    bad_types = ["sliding_attention"] * 6
    for change, needle in [({"query_pre_attn_scalar": 168}, "query_pre_attn_scalar 168 is not supported (a 6-layer gemma3"),
                           ({"final_logit_softcapping": 30.0}, "final_logit_softcapping is not supported"),
                           ({"rope_local_base_freq": 20000.0}, "rope_local_base_freq 20000"),
                           ({"hidden_activation": "silu"}, "hidden_activation 'silu'"),
                           ({"layer_types": bad_types}, "layer 5 is \"sliding_attention\""),
                           ({"sliding_window_pattern": 4}, "sliding_window_pattern 4"),
                           ({"tie_word_embeddings": False}, "untied embeddings")]:
        (src / "config.json").write_text(json.dumps({**cfg, **change}))
        p = convert(src, out)
        assert p.returncode != 0 and needle in p.stderr, (change, p.stderr)
        assert not out.exists()
    (src / "config.json").write_text(json.dumps(cfg))
    tj = json.loads((src / "tokenizer.json").read_text())
    tj["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, tj["normalizer"]]}
    (src / "tokenizer.json").write_text(json.dumps(tj))
    p = convert(src, out)
    assert p.returncode != 0 and "normalizer 'NFKC' is not supported" in p.stderr, p.stderr
    tj["normalizer"] = tj["pre_tokenizer"] = None
    (src / "tokenizer.json").write_text(json.dumps(tj))
    p = convert(src, out)
    assert p.returncode != 0 and "does not turn spaces into" in p.stderr, p.stderr


def test_rope_parameters_of_newer_configs(tmp_path):
    """transformers 5 writes RoPE settings under rope_parameters: its rope_theta is used, and its
    scaling (like rope_scaling in older configs) becomes llama.cpp's rope.scaling.* keys."""
    import gguf
    m = make_folder(tmp_path / "hf", "qwen2", seed=6)
    cfg = dict(m["cfg"])
    theta = cfg.pop("rope_theta")
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    (tmp_path / "hf" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "m.gguf"
    assert convert(tmp_path / "hf", out).returncode == 0
    r = gguf.GGUFReader(str(out))
    assert float(r.fields["qwen2.rope.freq_base"].parts[-1][0]) == theta
    assert "qwen2.rope.scaling.type" not in r.fields
    cfg["rope_parameters"] = {"rope_type": "yarn", "rope_theta": theta, "factor": 4.0,
                              "original_max_position_embeddings": 64, "beta_fast": 16.0}
    (tmp_path / "hf" / "config.json").write_text(json.dumps(cfg))
    assert convert(tmp_path / "hf", out).returncode == 0
    r = gguf.GGUFReader(str(out))
    assert r.fields["qwen2.rope.scaling.type"].contents() == "yarn"
    assert r.fields["qwen2.rope.scaling.factor"].contents() == 4.0
    assert r.fields["qwen2.rope.scaling.original_context_length"].contents() == 64
    assert r.fields["qwen2.rope.scaling.yarn_beta_fast"].contents() == 16.0
    assert "qwen2.rope.scaling.yarn_beta_slow" not in r.fields


def test_rope_scaling_of_older_configs(tmp_path):
    """rope_scaling (with "type" or "rope_type") as llama.cpp writes it; kinds Triad cannot run are
    clear errors."""
    import gguf
    m = make_folder(tmp_path / "hf", "llama", seed=7)
    out = tmp_path / "m.gguf"

    def with_scaling(rs):
        cfg = dict(m["cfg"])
        cfg["rope_scaling"] = rs
        (tmp_path / "hf" / "config.json").write_text(json.dumps(cfg))
        return convert(tmp_path / "hf", out)

    assert with_scaling({"type": "linear", "factor": 2.0}).returncode == 0
    r = gguf.GGUFReader(str(out))
    assert r.fields["llama.rope.scaling.type"].contents() == "linear"
    assert r.fields["llama.rope.scaling.factor"].contents() == 2.0
    for rs, needle in [({"rope_type": "llama3", "factor": 8.0}, "rope scaling 'llama3' is not supported"),
                       ({"type": "dynamic", "factor": 2.0}, "rope scaling 'dynamic' is not supported"),
                       ({"type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
                       ({"type": "linear"}, "factor >= 1"),
                       ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                         "attention_factor": 0.5}, "attention_factor")]:
        p = with_scaling(rs)
        assert p.returncode != 0 and needle in p.stderr, (rs, p.stderr)


def test_a_folder_is_served_through_a_cached_conversion(tmp_path):
    """`-m HF_DIR` (serve, run, bench, eval-logits ...) converts the folder once into
    $TRIAD_HOME/converted, keeping the weights' precision, and reuses it until an input changes."""
    m = make_folder(tmp_path / "hf", "qwen2", seed=4)
    tokens = [1, 5, 9, 20, 33]
    env = {**os.environ, "TRIAD_HOME": str(tmp_path / "home")}

    def logits_of(model):
        out = tmp_path / "logits.f32"
        p = subprocess.run([gu.require("eval-logits"), "eval-logits", "-m", str(model), "--tokens", ",".join(map(str, tokens)),
                            "--out", str(out), "--threads", "1"], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        return np.fromfile(out, dtype="<f4").reshape(len(tokens), -1), p.stderr

    first, log1 = logits_of(tmp_path / "hf")
    assert "converting" in log1 and "(F32)" in log1, log1
    second, log2 = logits_of(tmp_path / "hf")
    assert "using the converted copy" in log2 and "converting" not in log2, log2
    assert np.array_equal(first, second)
    out = tmp_path / "direct.gguf"
    assert convert(tmp_path / "hf", out).returncode == 0
    direct, _ = logits_of(out)
    assert np.array_equal(first, direct)  # f32 kept: the same file's arithmetic
    ref = hf_forward(m, tokens)
    assert np.abs(first - ref).max() / max(1.0, np.abs(ref).max()) < 1e-4
    # An edited input converts again.
    cfg = tmp_path / "hf" / "config.json"
    os.utime(cfg, ns=(os.stat(cfg).st_atime_ns, os.stat(cfg).st_mtime_ns + 10**9))
    _, log3 = logits_of(tmp_path / "hf")
    assert "converting" in log3, log3
    assert len(os.listdir(tmp_path / "home" / "converted")) == 2


VOCABS = [  # (GGUF vocabulary, its folder, the split pattern its tokenizer.json gets; None: GPT-2's byte level)
    ("ggml-vocab-gpt-2.gguf", "testdata", None),
    ("ggml-vocab-qwen2.gguf", "extra", QWEN2_SPLIT),
    ("ggml-vocab-llama-bpe.gguf", "extra", LLAMA3_SPLIT),
]


@pytest.mark.parametrize("vocab,where,split", VOCABS, ids=[v[0] for v in VOCABS])
def test_tokenizer_round_trips_llama_cpp_vocabularies(tmp_path, vocab, where, split):
    """A real vocabulary (llama.cpp's test GGUF) written as a Hugging Face tokenizer.json with PyPI
    tokenizers, converted back by `triad convert`, tokenizes llama.cpp's test vectors as llama.cpp
    does (../shared/testdata/tokenizer/*.inp / *.out)."""
    import gguf
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    testdata = os.environ.get("TRIAD_TESTDATA", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "testdata"))
    folder = os.path.join(testdata, "tokenizer") if where == "testdata" else os.environ.get(
        "TRIAD_EXTRA_VOCAB_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".cache", "vocab"))
    path = os.path.join(folder, vocab)
    cases_base = os.path.join(testdata, "tokenizer", vocab)
    if not os.path.exists(path) or not os.path.exists(cases_base + ".inp"):
        pytest.skip(f"{path} or its test vectors are missing")
    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in r.fields["tokenizer.ggml.token_type"].data]
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    vocab_map = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    model = models.BPE(vocab=vocab_map, merges=merges, ignore_merges=(split == LLAMA3_SPLIT))
    tok = Tokenizer(model)
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    added = [(i, t) for i, t in enumerate(tokens) if types[i] in (3, 4)]
    tok.add_tokens([AddedToken(t, special=types[i] == 3, normalized=False) for i, t in added])
    hf = tmp_path / "hf"
    hf.mkdir()
    tok.save(str(hf / "tokenizer.json"))
    # The saved ids must be the GGUF's (added tokens keep their ids only when they come in order).
    tj = json.loads((hf / "tokenizer.json").read_text())
    assert all(tj["model"]["vocab"][t] == i for t, i in vocab_map.items())
    assert all(tokens[a["id"]] == a["content"] for a in tj["added_tokens"]), "added token ids moved"
    n = len(tokens)
    tiny_weights(hf, n)
    (hf / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": False}))
    out = tmp_path / "vocab.gguf"
    p = convert(hf, out)
    assert p.returncode == 0, p.stderr
    cases = vocab_cases(cases_base)
    bad = [(text, got, ids) for text, ids in cases if (got := triad_ids(out, text)) != ids]
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:2]}"


def tiny_weights(hf, n: int, arch: str = "Qwen2ForCausalLM"):
    """config.json and model.safetensors of a one-layer model of vocabulary n (the tokenizer tests' carrier)."""
    cfg = {"architectures": [arch], "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 1, "intermediate_size": 16, "vocab_size": n, "tie_word_embeddings": True}
    (hf / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(0)
    w = {"model.embed_tokens.weight": rng.standard_normal((n, 8)).astype(np.float32),
         "model.norm.weight": np.ones(8, dtype=np.float32),
         "model.layers.0.input_layernorm.weight": np.ones(8, dtype=np.float32),
         "model.layers.0.post_attention_layernorm.weight": np.ones(8, dtype=np.float32)}
    shapes = [("self_attn.q_proj.weight", (8, 8)), ("self_attn.k_proj.weight", (4, 8)), ("self_attn.v_proj.weight", (4, 8)),
              ("self_attn.o_proj.weight", (8, 8)), ("mlp.gate_proj.weight", (16, 8)), ("mlp.up_proj.weight", (16, 8)),
              ("mlp.down_proj.weight", (8, 16))]
    if arch == "Qwen2ForCausalLM":
        shapes += [("self_attn.q_proj.bias", (8,)), ("self_attn.k_proj.bias", (4,)), ("self_attn.v_proj.bias", (4,))]
    for k, shape in shapes:
        w["model.layers.0." + k] = rng.standard_normal(shape).astype(np.float32)
    st_numpy.save_file(w, str(hf / "model.safetensors"))


def vocab_cases(cases_base: str) -> list:
    """llama.cpp's test vectors: (text, expected ids) from <vocab>.inp / <vocab>.out."""
    inp = open(cases_base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    want = open(cases_base + ".out", encoding="utf-8").read().split("\n")
    cases = [(text, [int(t) for t in ids.split()]) for text, ids in zip(inp, want)]
    assert len(cases) > 30
    return cases


def triad_ids(model, text: str, bos: bool = False, special: bool = False) -> list:
    """`triad tokenize` of text, without BOS and special-token parsing unless asked."""
    q = gu.run_triad(["tokenize", "-m", model, "-p", text] + ([] if bos else ["--no-bos"]) +
                     ([] if special else ["--no-parse-special"]))
    lines = [ln for ln in q.stdout.decode().splitlines() if ln.strip()]
    return [int(t) for t in lines[-1].split()] if lines else []


def gguf_vocab(path: str):
    """tokens, scores and types of a GGUF's SentencePiece vocabulary (PyPI gguf)."""
    import gguf
    r = gguf.GGUFReader(path)
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = r.fields["tokenizer.ggml.scores"]
    scores = [float(f.parts[i][0]) for i in f.data]
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    return r, tokens, scores, types


def spm_merges(tokens: list, scores: list, types: list) -> list:
    """The merges Hugging Face derives from a SentencePiece model (transformers' converter): every
    split of a normal piece into two normal pieces, ordered by the piece's score (highest first),
    a piece's splits by the ids of their parts."""
    normal = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    merges = []
    for piece, i in sorted(normal.items(), key=lambda kv: (-scores[kv[1]], kv[1])):
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in normal and piece[k:] in normal]
        merges += sorted(local, key=lambda ab: (normal[ab[0]], normal[ab[1]]))
    return merges


def spm_folder_from_gguf(hf, path: str, style: str, arch: str = "Qwen2ForCausalLM"):
    """A Hugging Face folder whose tokenizer.json is the GGUF's SentencePiece vocabulary in the form
    transformers writes (vocab by id, merges from the scores, control tokens special added tokens,
    user-defined ones plain added tokens), with tiny weights; returns (tokenizer, tokens, types)."""
    r, tokens, scores, types = gguf_vocab(path)
    vocab = {t: i for i, t in enumerate(tokens)}
    unk = next((t for i, t in enumerate(tokens) if types[i] == 2), "<unk>")  # gemma's GGUF has <unk> as a control token
    # Control and user-defined pieces are added tokens (special / not); so are the unknown-typed
    # pieces other than unk (Phi-3's placeholders), which tokenizer.json can only call special.
    added = [(t, types[i] != 4) for i, t in enumerate(tokens) if types[i] in (3, 4) or (types[i] == 2 and t != unk)]
    tok = spm_tokenizer(vocab, spm_merges(tokens, scores, types), style, added, unk=unk)
    hf.mkdir()
    tok.save(str(hf / "tokenizer.json"))
    tj = json.loads((hf / "tokenizer.json").read_text())
    assert all(tokens[a["id"]] == a["content"] for a in tj["added_tokens"]), "added token ids moved"
    tiny_weights(hf, len(tokens), arch)
    bos = int(r.fields["tokenizer.ggml.bos_token_id"].parts[-1][0])
    eos = int(r.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    (hf / "tokenizer_config.json").write_text(json.dumps({"bos_token": tokens[bos], "eos_token": tokens[eos],
                                                          "add_bos_token": True, "add_eos_token": False}))
    return tok, tokens, types


SPM_VOCABS = ["ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"]


@pytest.mark.parametrize("vocab", SPM_VOCABS)
def test_sentencepiece_vocabularies_round_trip(tmp_path, vocab):
    """A real SentencePiece vocabulary (llama.cpp's Llama 2 and Phi-3 test GGUFs) written as the
    tokenizer.json Hugging Face ships for such models (BPE with byte fallback, merges instead of
    scores, Prepend + Replace normalizer) and converted back: PyPI tokenizers on that file and
    Triad on the converted GGUF both tokenize llama.cpp's test vectors as llama.cpp does, and the
    GGUF keeps the pieces, their types and add_space_prefix."""
    import gguf  # noqa: F401
    testdata = os.environ.get("TRIAD_TESTDATA", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "testdata"))
    path = os.path.join(testdata, "tokenizer", vocab)
    if not os.path.exists(path) or not os.path.exists(path + ".inp"):
        pytest.skip(f"{path} or its test vectors are missing")
    hf = tmp_path / "hf"
    tok, tokens, types = spm_folder_from_gguf(hf, path, "llama", "LlamaForCausalLM")
    cases = vocab_cases(path)
    hf_bad = [(text, got, ids) for text, ids in cases if (got := tok.encode(text, add_special_tokens=False).ids) != ids]
    assert not hf_bad, f"the tokenizer.json itself: {len(hf_bad)} of {len(cases)} differ, e.g. {hf_bad[:2]}"
    out = tmp_path / "spm.gguf"
    p = convert(hf, out)
    assert p.returncode == 0, p.stderr
    _, got_tokens, _, got_types = gguf_vocab(str(out))
    assert got_tokens == tokens
    unk = types.index(2)
    want_types = [3 if t == 2 and i != unk else t for i, t in enumerate(types)]  # see spm_folder_from_gguf
    assert got_types == want_types, [(i, a, b) for i, (a, b) in enumerate(zip(want_types, got_types)) if a != b][:5]
    r = gguf.GGUFReader(str(out))
    assert r.fields["tokenizer.ggml.model"].contents() == "llama"
    assert r.fields["tokenizer.ggml.add_space_prefix"].contents() is True
    bad = [(text, got, ids) for text, ids in cases if (got := triad_ids(out, text)) != ids]
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:2]}"


def test_gemma3_vocabulary_round_trips(tmp_path):
    """Gemma 3's 262,144-piece vocabulary (from the real gemma-3-270m GGUF, whose scores come from
    its tokenizer.model) written as Gemma's tokenizer.json (no prefix space, Replace(" ", "▁"),
    merges instead of scores) and converted back tokenizes like the original GGUF, with and without
    BOS and special tokens, and like PyPI tokenizers on that tokenizer.json."""
    import gguf
    d = os.environ.get("TRIAD_MODELS_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "models"))
    path = os.path.join(d, "gemma-3-270m-q4_k_m.gguf")
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (scripts/fetch_models.sh --all)")
    hf = tmp_path / "hf"
    tok, tokens, types = spm_folder_from_gguf(hf, path, "gemma")
    out = tmp_path / "gemma-vocab.gguf"
    p = convert(hf, out)
    assert p.returncode == 0, p.stderr
    r = gguf.GGUFReader(str(out))
    assert r.fields["tokenizer.ggml.add_space_prefix"].contents() is False
    _, got_tokens, _, got_types = gguf_vocab(str(out))
    assert got_tokens == tokens
    unk = tokens.index("<unk>")  # tokenizer.json's unk_token: unknown (2) where llama.cpp's gemma3 GGUF says control (3)
    assert got_types[unk] == 2 and got_types[:unk] + got_types[unk + 1:] == types[:unk] + types[unk + 1:]
    texts = TEXTS + CORPUS[:6] + ["<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
                                 "    four spaces", "\t\ttabs\n\n\n", "<b>bold</b> <unused0>", "x" * 40]
    testdata = os.environ.get("TRIAD_TESTDATA", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "testdata"))
    cases = os.path.join(testdata, "tokenizer", "ggml-vocab-llama-spm.gguf.inp")
    if os.path.exists(cases):
        texts += open(cases, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    bad = []
    for text in texts:
        want = triad_ids(path, text)
        got = triad_ids(out, text)
        # tokenizers always matches added tokens: as Triad does when it parses special tokens.
        hf_ids, got_sp = tok.encode(text, add_special_tokens=False).ids, triad_ids(out, text, special=True)
        if not (got == want and got_sp == hf_ids):
            bad.append((text, want, got, got_sp, hf_ids))
    for text in texts[:12]:
        if triad_ids(out, text, bos=True, special=True) != triad_ids(path, text, bos=True, special=True):
            bad.append((text, "with BOS and specials"))
    assert not bad, f"{len(bad)} of {len(texts)} differ (original, converted, converted with specials, tokenizers): {bad[:2]}"


# ----------------------------------------------------------------------------------------------
# FP8 checkpoints (DeepSeek-V3 / Qwen3-FP8 style): F8_E4M3 linear weights with block scales
# ----------------------------------------------------------------------------------------------
#
# The 2-D linear weights (q/k/v/o, gate/up/down) are stored as safetensors F8_E4M3 (OCP E4M3FN:
# 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, subnormals, no infinities, S.1111.111 is
# NaN, largest 448), each with "<name>_scale_inv" (F32 or BF16) holding one factor per block of
# quantization_config.weight_block_size = [rows, cols] (128 x 128 when absent): the real weight is
# fp8_value * scale_inv[r // rows, c // cols], the scale tensor [ceil(R / rows), ceil(C / cols)].
# numpy has no FP8, so the codes are made here from their definition and the files are written by
# hand (8-byte little-endian header length, JSON header, data), as the safetensors format defines.
# The expected model is the dequantized one: its logits from hf_forward must match the GGUF's.

import struct  # noqa: E402


def e4m3_values() -> np.ndarray:
    """The float64 value of each of the 256 E4M3FN codes (NaN for 0x7F and 0xFF)."""
    out = np.empty(256, dtype=np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 0xF, c & 7
        if (c & 0x7F) == 0x7F:
            v = np.nan
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6           # subnormal: 0.mmm x 2^(1 - 7)
        else:
            v = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        out[c] = -v if s else v
    return out


E4M3 = e4m3_values()


def e4m3_encode(x: np.ndarray) -> np.ndarray:
    """uint8 codes of the E4M3FN values nearest to x (|x| clipped to 448; never a NaN code)."""
    mags = E4M3[:0x7F]                         # codes 0x00..0x7E: 0 .. 448, increasing
    assert np.all(np.diff(mags) > 0) and mags[-1] == 448.0
    a = np.minimum(np.abs(np.asarray(x, dtype=np.float64)), 448.0)
    hi = np.clip(np.searchsorted(mags, a), 1, 0x7E)
    lo = hi - 1
    code = np.where(a - mags[lo] <= mags[hi] - a, lo, hi).astype(np.uint8)
    return np.where(np.signbit(x), code | 0x80, code).astype(np.uint8)


def bf16_bytes(x: np.ndarray) -> bytes:
    """x (already exactly representable in BF16) as little-endian BF16."""
    bits = np.ascontiguousarray(x, dtype="<f4").view("<u4")
    assert np.all(bits & 0xFFFF == 0), "not a BF16 value"
    return (bits >> 16).astype("<u2").tobytes()


def write_safetensors(path, tensors: dict):
    """A safetensors file from {name: (dtype, shape, raw little-endian bytes)}, written as the
    format defines it (wider dtypes first, so every tensor stays aligned to its element size)."""
    width = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1}
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors, key=lambda n: -width[tensors[n][0]]):
        dtype, shape, data = tensors[name]
        assert len(data) == int(np.prod(shape, dtype=np.int64)) * width[dtype], name
        header[name] = {"dtype": dtype, "shape": [int(d) for d in shape], "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


FP8_LINEAR = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
              "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
# Codes every FP8 weight gets a few of: zeros of both signs, the smallest and largest subnormals,
# the smallest normal, and +-448.
FP8_SPECIAL = np.array([0x00, 0x80, 0x01, 0x81, 0x07, 0x87, 0x08, 0x88, 0x7E, 0xFE], dtype=np.uint8)


def fp8_quantize(w: np.ndarray, block, rng, scale_dtype: str):
    """(codes uint8 [R, C], scale_inv float64 [ceil(R/br), ceil(C/bc)], dequantized float64 [R, C]).
    The block scales vary by up to 2^+-1.5 between blocks (so a block read from the wrong place
    shows); with BF16 scales, each is a BF16 value."""
    R, C = w.shape
    br, bc = block
    nbr, nbc = -(-R // br), -(-C // bc)
    base = float(np.abs(w).std()) / 100.0          # fp8 values ~ N(0, 100^2)
    scale = base * 2.0 ** rng.uniform(-1.5, 1.5, (nbr, nbc))
    if scale_dtype == "BF16":
        scale = (scale.astype("<f4").view("<u4") & 0xFFFF0000).view("<f4").astype(np.float64)
    else:
        scale = scale.astype(np.float32).astype(np.float64)
    codes = e4m3_encode(w / base)
    pick = rng.random(w.shape) < 0.02
    codes[pick] = rng.choice(FP8_SPECIAL, int(pick.sum()))
    full = np.repeat(np.repeat(scale, br, axis=0), bc, axis=1)[:R, :C]
    deq = E4M3[codes] * full
    assert np.all(np.isfinite(deq))
    return codes, scale, deq


def fp8_folder(path, arch: str, seed: int, block=(20, 28), scale_dtype: str = "F32", shards: bool = False,
               keep_f32=(), block_key: bool = True) -> dict:
    """make_folder's model with its linear weights stored as FP8 + block scales (except the names in
    keep_f32, left F32 as checkpoints leave some modules unquantized); returns make_folder's dict
    with "w" the dequantized weights (what the checkpoint means) and "st" the stored tensors."""
    m = make_folder(path, arch, seed)
    rng = np.random.default_rng(seed + 1000)
    st, deq = {}, {}
    for name, w in m["w"].items():
        if name.endswith(FP8_LINEAR) and name not in keep_f32:
            codes, scale, d = fp8_quantize(w, block, rng, scale_dtype)
            st[name] = ("F8_E4M3", w.shape, codes.tobytes())
            sb = scale.astype("<f4").tobytes() if scale_dtype == "F32" else bf16_bytes(scale.astype(np.float32))
            st[name + "_scale_inv"] = (scale_dtype, scale.shape, sb)
            deq[name] = d
        else:
            st[name] = ("F32", w.shape, np.ascontiguousarray(w, dtype="<f4").tobytes())
            deq[name] = w
    for f in os.listdir(path):
        if f.endswith(".safetensors") or f.endswith(".safetensors.index.json"):
            os.remove(os.path.join(path, f))
    if shards:
        # Sorted names split in two, moved by one so that a weight and its scales land in
        # different shards (a checkpoint's index may do that).
        names = sorted(st)
        cut = names.index("model.layers.0.mlp.down_proj.weight") + 1
        assert names[cut] == "model.layers.0.mlp.down_proj.weight_scale_inv"
        files = {"model-00001-of-00002.safetensors": names[:cut], "model-00002-of-00002.safetensors": names[cut:]}
        for fname, ns in files.items():
            write_safetensors(os.path.join(path, fname), {n: st[n] for n in ns})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": {n: fn for fn, ns in files.items() for n in ns}}, f)
    else:
        write_safetensors(os.path.join(path, "model.safetensors"), st)
    qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8"}
    if block_key:
        qc["weight_block_size"] = list(block)
    m["cfg"] = {**m["cfg"], "quantization_config": qc}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(m["cfg"], f)
    return {**m, "w": deq, "st": st}


def test_e4m3_table_is_the_ocp_definition():
    """The FP8 codes the tests write (no binary): known values of the OCP E4M3FN format."""
    known = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6, 0x30: 0.5, 0x38: 1.0, 0x40: 2.0,
             0x44: 3.0, 0x7E: 448.0, 0xB8: -1.0, 0xFE: -448.0}
    for c, v in known.items():
        assert E4M3[c] == v, hex(c)
    assert np.isnan(E4M3[0x7F]) and np.isnan(E4M3[0xFF]) and np.sum(np.isnan(E4M3)) == 2
    codes = np.array([c for c in range(256) if (c & 0x7F) != 0x7F], dtype=np.uint8)
    finite = E4M3[codes]
    assert np.array_equal(e4m3_encode(finite), codes), "every finite value encodes to its own code"
    x = np.random.default_rng(0).uniform(-500, 500, 10000)
    got = E4M3[e4m3_encode(x)]
    best = np.abs(np.clip(x, -448, 448)[:, None] - finite[None, :]).min(axis=1)
    assert np.allclose(np.abs(got - np.clip(x, -448, 448)), best), "not the nearest code"


FP8_CASES = [  # (id, arch, fp8_folder keywords)
    ("qwen2-20x28-f32-scales", "qwen2", dict(block=(20, 28), keep_f32=("model.layers.1.mlp.down_proj.weight",))),
    ("llama-20x28-bf16-scales-shards", "llama", dict(block=(20, 28), scale_dtype="BF16", shards=True)),
    ("qwen2-16x24", "qwen2", dict(block=(16, 24))),
    ("qwen2-default-128x128", "qwen2", dict(block=(128, 128), block_key=False)),
]


@pytest.mark.parametrize("arch,kw", [c[1:] for c in FP8_CASES], ids=[c[0] for c in FP8_CASES])
def test_fp8_block_scaled_checkpoint_matches_its_dequantized_model(tmp_path, arch, kw):
    """hidden 64, ffn 96, kv rows 32 against blocks 20 x 28 (every shape has tail blocks in both
    directions) or 16 x 24 (tails only across 64 columns), and the default 128 x 128 (one block)."""
    m = fp8_folder(tmp_path / "hf", arch, seed=11 + len(arch), **kw)
    br, bc = kw["block"]
    sc = m["st"]["model.layers.0.mlp.down_proj.weight_scale_inv"]
    assert list(sc[1]) == [-(-64 // br), -(-96 // bc)]
    out = tmp_path / "model.gguf"
    p = convert(tmp_path / "hf", out)
    assert p.returncode == 0, p.stderr
    assert f"{arch}," in p.stdout
    import gguf
    r = gguf.GGUFReader(str(out))
    names = {t.name for t in r.tensors}
    assert not any("scale" in n for n in names), sorted(names)
    kinds = {gguf.GGMLQuantizationType(int(t.tensor_type)).name for t in r.tensors}
    assert kinds == {"F32"}, f"--outtype f32 wrote {kinds}"
    tokens = list(np.random.default_rng(7).integers(0, m["cfg"]["vocab_size"], 24))
    got = gu.eval_logits(str(out), tokens, m["cfg"]["vocab_size"])
    ref = hf_forward(m, tokens)
    err = np.abs(got - ref).max() / max(1.0, np.abs(ref).max())
    assert err < 1e-4, f"{arch} {kw}: max relative error {err:.2e} against the dequantized model"
    # The stored FP8 values without their scales are a different model: the test can tell.
    raw = {**m, "w": {n: (E4M3[np.frombuffer(m["st"][n][2], np.uint8)].reshape(m["st"][n][1]) if m["st"][n][0] == "F8_E4M3"
                          else m["w"][n]) for n in m["w"]}}
    with np.errstate(over="ignore"):  # unscaled values reach 448: silu's exp overflows to a harmless 0
        assert np.abs(hf_forward(raw, tokens) - ref).max() / max(1.0, np.abs(ref).max()) > 1e-2


def test_fp8_checkpoint_errors(tmp_path):
    m = fp8_folder(tmp_path / "hf", "qwen2", seed=21, block=(20, 28))
    src = tmp_path / "hf"
    out = tmp_path / "out.gguf"

    def expect(*needles):
        p = convert(src, out)
        assert p.returncode != 0, p.stdout
        for n in needles:
            assert n in p.stderr, (n, p.stderr)
        assert not out.exists()

    # A weight without its scales.
    st = dict(m["st"])
    del st["model.layers.1.self_attn.k_proj.weight_scale_inv"]
    write_safetensors(src / "model.safetensors", st)
    expect("block scales", "model.layers.1.self_attn.k_proj.weight")
    # Scales of the wrong shape: transposed, one block short, one block too many.
    for shape in ([5, 4], [4, 4], [4, 6]):  # q_proj [64, 64] in 20 x 28 blocks is [4, 3]
        st = dict(m["st"])
        st["model.layers.0.self_attn.q_proj.weight_scale_inv"] = ("F32", shape, np.ones(shape, "<f4").tobytes())
        write_safetensors(src / "model.safetensors", st)
        expect("model.layers.0.self_attn.q_proj.weight_scale_inv")
    write_safetensors(src / "model.safetensors", m["st"])
    # A quantization method other than fp8.
    cfg = dict(m["cfg"])
    (src / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "awq", "bits": 4}}))
    expect("quant_method", "awq")
    # The weight_block_size that does not fit the stored scales ([4, 3] blocks of 20 x 28).
    (src / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "fp8",
                                                                                "weight_block_size": [128, 128]}}))
    expect("_scale_inv")
    (src / "config.json").write_text(json.dumps(cfg))
    assert convert(src, out).returncode == 0  # the folder itself was fine

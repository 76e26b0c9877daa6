"""Golden test of BERT sentence embeddings: all-MiniLM-L6-v2 converted by `triad convert` and
served by `triad serve` at POST /v1/embeddings, against the independent numpy reference
(tests/reference/bert_ref.py, float64 over the *safetensors* weights) and PyPI tokenizers.

Over the 200 inputs of embedding_corpus.CORPUS (plain text, punctuation, accents, CJK, emoji,
control characters, code, URLs, and long texts up to and past the 512-position limit):
  * tokenizer: the ids of POST /tokenize (add_special_tokens true) equal PyPI tokenizers' ids on
    the folder's tokenizer.json (truncation and padding off) for every input, long ones included;
  * numerics: for every input of at most 512 tokens, the served embedding (F32 weights) has
    cosine similarity >= 0.9999 with the reference's, and unit length (|1 - ||e||| <= 1e-5);
    usage.prompt_tokens is the input's token count;
  * limits: every input over 512 tokens is a 400 (param "input") whose message names the input's
    index and token count, alone and inside a batch;
  * batching: the fitting inputs sent 32 per request give, input by input, the embedding of a
    single-input request bitwise (results must not depend on load; F32 kernels are
    batch-invariant), in order, with usage summing the token counts;
  * the converted GGUF's metadata (when PyPI gguf is importable): architecture bert, mean pooling,
    BERT tokenizer, non-causal attention, the model's sizes, F32 tensors;
  * F16 and Q8_0 conversions stay near the reference (cosine >= 0.9999 / 0.995) on a subset;
  * bert_ref's own self-check (no binary needed), including cosines published by
    sentence-transformers for this model.

Embeddings are fetched as base64 (exact float32 bits); a sample is also fetched as JSON floats,
which must read back to the same float32 values.

Skips: TRIAD_BIN unset, or the model folder missing ($TRIAD_MODELS_DIR/all-MiniLM-L6-v2, default
<repo>/models). Runtime: two conversions of a 90 MB model, ~6,400 tokens through the server twice,
the float64 reference over the same tokens (seconds).
"""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import golden_util as gu  # puts tests/reference on sys.path
import bert_ref  # noqa: E402
from embedding_corpus import CORPUS, N_CORPUS

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors.numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
MODEL_NAME = "all-MiniLM-L6-v2"
N_EMBD = 384
N_CTX = 512
COS_MIN = 0.9999          # F32 weights: float32 arithmetic vs float64 gives ~1e-7 in practice
BATCH_TOL = 0.0           # a vector in a batch vs the same input alone: bitwise (F32 kernels are batch-invariant)
BATCH = 32
# Least cosine with the reference per --outtype. Emulating the weights' rounding (and the
# activations': F16, or Q8_0 blocks of 32, as llama.cpp-style CPU kernels do) in bert_ref gives
# minima of 0.9999995 (f16) and 0.9988 (q8_0) on the same sample.
LOW_PRECISION = {"f16": 0.9999, "q8_0": 0.995}


# ----------------------------------------------------------------------------------------------
# A `triad serve` process (a small launcher like tests/server/conftest.py's Server)
# ----------------------------------------------------------------------------------------------

class Server:
    """`triad serve --port 0 --threads 1 ARGS` on loopback; ready when it prints
    "serving N model(s) on http://127.0.0.1:PORT/v1 ..."."""

    def __init__(self, args, env=None, ready_s: float = 180.0):
        cmd = [gu.triad_bin(), "serve", "--port", "0", "--threads", "1"] + [str(a) for a in args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})
        self.log = []
        self.port = None
        deadline = time.time() + ready_s
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"serving .* on http://[^:]+:(\d+)/v1", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            self.proc.communicate()
            pytest.fail("triad serve did not start:\n" + "".join(self.log[-40:]))
        self.base = f"http://127.0.0.1:{self.port}"
        # The server logs a line per request: keep reading, or a full pipe blocks its writes.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def post(self, path: str, body: dict, timeout: float = 600.0):
        """(status, parsed JSON body) of a POST."""
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        return self.proc.returncode


def decode(item) -> np.ndarray:
    """One data[] entry's embedding as float32 (base64 of little-endian float32, or floats)."""
    e = item["embedding"]
    if isinstance(e, str):
        return np.frombuffer(base64.b64decode(e), dtype="<f4").copy()
    return np.asarray(e, dtype=np.float64).astype(np.float32)


def embeddings(s: Server, inputs, fmt: str = "base64", model: str = "minilm") -> tuple:
    """(float32 [n, dim] embeddings, usage) of one successful request."""
    status, body = s.post("/v1/embeddings", {"model": model, "input": inputs, "encoding_format": fmt})
    assert status == 200, body
    n = len(inputs) if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else 1
    assert body["object"] == "list" and body["model"] == model, body.get("model")
    assert [d["index"] for d in body["data"]] == list(range(n)), "data out of order"
    assert all(d["object"] == "embedding" for d in body["data"])
    return np.stack([decode(d) for d in body["data"]]), body["usage"]


# ----------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm_dir():
    d = os.path.join(os.environ.get("TRIAD_MODELS_DIR") or os.path.join(REPO, "models"), MODEL_NAME)
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        pytest.skip(f"{d} missing (a Hugging Face folder of sentence-transformers/{MODEL_NAME})")
    return d


@pytest.fixture(scope="module")
def hf_ids(minilm_dir):
    """PyPI tokenizers' ids of every corpus input (special tokens added, no truncation)."""
    tok = bert_ref.hf_tokenizer(minilm_dir)
    return [tok.encode(t).ids for t in CORPUS]


@pytest.fixture(scope="module")
def fitting(hf_ids):
    """Indices of the corpus inputs within the 512 positions."""
    idx = [i for i, ids in enumerate(hf_ids) if len(ids) <= N_CTX]
    assert N_CORPUS - len(idx) >= 3, "the corpus must have inputs over the limit"
    return idx


def convert(minilm_dir, out_dir, outtype: str) -> str:
    gu.require("convert")
    out = os.path.join(str(out_dir), f"minilm-{outtype}.gguf")
    gu.run_triad(["convert", minilm_dir, "-o", out, "--outtype", outtype], timeout=600)
    assert os.path.getsize(out) > 0
    return out


@pytest.fixture(scope="module")
def gguf_f32(minilm_dir, tmp_path_factory):
    return convert(minilm_dir, tmp_path_factory.mktemp("minilm"), "f32")


@pytest.fixture(scope="module")
def server(gguf_f32):
    s = Server(["-m", gguf_f32, "--alias", "minilm"])
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-30:])


@pytest.fixture(scope="module")
def singles(server, hf_ids, fitting):
    """{corpus index: float32 embedding} of a single-input request for every fitting input (as
    a one-element array, base64), checking usage on the way."""
    out = {}
    for i in fitting:
        e, usage = embeddings(server, [CORPUS[i]])
        assert e.shape == (1, N_EMBD), (i, e.shape)
        assert usage["prompt_tokens"] == len(hf_ids[i]) and usage["total_tokens"] == len(hf_ids[i]), (i, usage)
        out[i] = e[0]
    return out


# ----------------------------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------------------------

def test_reference_self_check(minilm_dir):
    """The reference itself (no binary): similar sentences nearer than unrelated ones, and the
    cosines sentence-transformers publishes for this model."""
    r = bert_ref.self_check(minilm_dir)
    assert r["pooling"] == "mean"
    assert len(r["published"]) == len(bert_ref.PUBLISHED_MINILM)


def test_corpus_shape(hf_ids):
    """The corpus has what the other tests rely on (checked with PyPI tokenizers, no binary)."""
    n = [len(ids) for ids in hf_ids]
    words = [len(t.split()) for t in CORPUS]
    assert len(CORPUS) == 200
    assert sum(1 for k in n if k > N_CTX) >= 3
    assert sum(1 for w, k in zip(words, n) if w >= 300 and k <= N_CTX) >= 7
    assert N_CTX in n and N_CTX + 1 in n, "the inputs of exactly 512 and 513 tokens"


def test_gguf_metadata(gguf_f32):
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(gguf_f32)
    md = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    assert md.get("general.architecture") == "bert"
    assert md.get("bert.pooling_type") == 1, "mean pooling (llama.cpp's LLAMA_POOLING_TYPE_MEAN)"
    assert md.get("tokenizer.ggml.model") == "bert"
    assert md.get("bert.attention.causal") is False
    assert md.get("bert.embedding_length") == N_EMBD
    assert md.get("bert.block_count") == 6
    assert md.get("bert.context_length") == N_CTX
    assert md.get("bert.attention.head_count") == 12
    assert len(md.get("tokenizer.ggml.tokens", [])) == 30522
    kinds = {gguf.GGMLQuantizationType(int(t.tensor_type)).name for t in r.tensors}
    assert kinds == {"F32"}, f"--outtype f32 wrote {kinds}"


def test_tokenize_matches_tokenizers(server, hf_ids):
    bad = []
    for i, text in enumerate(CORPUS):
        status, body = server.post("/tokenize", {"model": "minilm", "prompt": text, "add_special_tokens": True})
        assert status == 200, (i, body)
        assert body["max_model_len"] == N_CTX
        if body["tokens"] != hf_ids[i] or body["count"] != len(hf_ids[i]):
            bad.append(f"[{i}] {text[:60]!r}: triad {body['tokens'][:24]} ({body['count']}), "
                       f"tokenizers {hf_ids[i][:24]} ({len(hf_ids[i])})")
    assert not bad, f"{len(bad)} of {len(CORPUS)} inputs tokenize differently:\n" + "\n".join(bad[:20])


def test_embeddings_match_reference(server, minilm_dir, hf_ids, fitting, singles):
    ref = bert_ref.load(minilm_dir)
    cos = {}
    for i in fitting:
        got = singles[i].astype(np.float64)
        assert np.all(np.isfinite(got)), i
        assert abs(np.linalg.norm(got) - 1.0) <= 1e-5, (i, np.linalg.norm(got))
        cos[i] = bert_ref.cosine(got, ref.embed(hf_ids[i]))
    worst = min(cos, key=cos.get)
    summary = (f"min cosine {cos[worst]:.8f} at input [{worst}] ({len(hf_ids[worst])} tokens, "
               f"{CORPUS[worst][:50]!r}), mean {np.mean(list(cos.values())):.8f} over {len(cos)} inputs")
    print(summary)
    assert cos[worst] >= COS_MIN, summary
    # JSON floats read back as the same float32 values as base64 (a sample: every 10th input).
    for i in fitting[::10]:
        e, _ = embeddings(server, [CORPUS[i]], fmt="float")
        assert np.array_equal(e[0], singles[i]), f"[{i}] float and base64 encodings differ"


def test_over_long_inputs_are_rejected(server, hf_ids, fitting):
    long_ = [i for i, ids in enumerate(hf_ids) if len(ids) > N_CTX]
    short = fitting[:3]
    for i in long_:
        n = len(hf_ids[i])
        for pos, inputs in ((0, [CORPUS[i]]), (3, [CORPUS[j] for j in short] + [CORPUS[i]])):
            status, body = server.post("/v1/embeddings", {"model": "minilm", "input": inputs})
            assert status == 400, (i, pos, status)
            err = body["error"]
            assert err["type"] == "invalid_request_error" and err["param"] == "input", err
            assert f"input[{pos}]" in err["message"], (i, pos, err["message"])
            assert re.search(rf"\b{n}\b", err["message"]), f"[{i}] message does not give its {n} tokens: {err['message']}"
    # The same limit for token-id input (513 ids; 512 is fine).
    ids = hf_ids[fitting[0]]
    over = (ids[:-1] * N_CTX)[:N_CTX] + [ids[-1]]
    status, body = server.post("/v1/embeddings", {"model": "minilm", "input": [ids, over]})
    assert status == 400 and body["error"]["param"] == "input", body
    assert "input[1]" in body["error"]["message"] and str(N_CTX + 1) in body["error"]["message"], body
    e, usage = embeddings(server, [over[:N_CTX]])
    assert e.shape == (1, N_EMBD) and usage["prompt_tokens"] == N_CTX


def test_batches_equal_single_requests(server, hf_ids, fitting, singles):
    worst, bitwise = 0.0, 0
    for k in range(0, len(fitting), BATCH):
        part = fitting[k:k + BATCH]
        got, usage = embeddings(server, [CORPUS[i] for i in part])
        assert got.shape == (len(part), N_EMBD)
        assert usage["prompt_tokens"] == sum(len(hf_ids[i]) for i in part), usage
        for row, i in zip(got, part):
            d = float(np.abs(row - singles[i]).max())
            assert d <= BATCH_TOL, f"input [{i}] in batch {k // BATCH}: max |difference| {d:.3g} from alone"
            worst = max(worst, d)
            bitwise += bool(np.array_equal(row, singles[i]))
    print(f"batched vs alone: max |difference| {worst:.3g}, {bitwise} of {len(fitting)} bitwise equal")


@pytest.fixture(scope="module")
def low_precision_server(minilm_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("minilm-lp")
    args = []
    for t in LOW_PRECISION:
        args += ["-m", convert(minilm_dir, d, t), "--alias", t]
    s = Server(args)
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_low_precision_conversions(low_precision_server, minilm_dir, hf_ids, fitting):
    ref = bert_ref.load(minilm_dir)
    sample = fitting[::8]
    want = {i: ref.embed(hf_ids[i]) for i in sample}
    for t, cos_min in LOW_PRECISION.items():
        got, _ = embeddings(low_precision_server, [CORPUS[i] for i in sample], model=t)
        cos = [bert_ref.cosine(g, want[i]) for g, i in zip(got, sample)]
        print(f"{t}: min cosine {min(cos):.6f} over {len(sample)} inputs")
        assert min(cos) >= cos_min, f"{t}: min cosine {min(cos):.6f} < {cos_min}"


def test_a_bert_model_with_a_unigram_tokenizer(minilm_dir, tmp_path):
    """A BertModel with an XLM-R style Unigram tokenizer, as the multilingual MiniLM / E5 models
    ship: all-MiniLM-L6-v2's weights beside the Unigram tokenizer.json of test_convert (trained
    here by SentencePiece; its ids index the same embedding rows). The converted GGUF must add
    <s> ... </s>, tokenize as PyPI tokenizers, and embed as the reference over those ids."""
    from test_convert import unigram_model

    sp, tj = unigram_model()
    hf = tmp_path / "multilingual-minilm"
    hf.mkdir()
    for name in os.listdir(minilm_dir):
        if name not in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
            os.symlink(os.path.join(minilm_dir, name), hf / name)
    (hf / "tokenizer.json").write_text(json.dumps(tj))
    (hf / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                                                          "pad_token": "<pad>", "tokenizer_class": "XLMRobertaTokenizer"}))
    out = convert(str(hf), tmp_path, "f32")
    tok = bert_ref.hf_tokenizer(str(hf))
    texts = ["A man is eating food.", "Le café était très bon", "東京は日本の首都です。", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
             "Emoji 😀 and ☃ unknown", "The quick brown fox jumps over the lazy dog."]
    s = Server(["-m", out, "--alias", "minilm"])
    try:
        for text in texts:
            ids = tok.encode(text).ids
            assert ids[0] == 0 and ids[-1] == 2
            status, body = s.post("/tokenize", {"model": "minilm", "prompt": text, "add_special_tokens": True})
            assert status == 200, body
            assert body["tokens"] == ids, f"{text!r}: triad {body['tokens']} vs tokenizers {ids}"
            e, usage = embeddings(s, [text])
            assert usage["prompt_tokens"] == len(ids)
            ref = bert_ref.embed(str(hf), ids)
            assert bert_ref.cosine(e[0], ref) >= 0.9999, text
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])

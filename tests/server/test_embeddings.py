"""POST /v1/embeddings with the official `openai` SDK and raw HTTP against a real `triad serve`
on loopback: all-MiniLM-L6-v2 served from its Hugging Face folder (`-m HF_DIR`, converted into a
private $TRIAD_HOME) as "minilm", next to stories260K as "stories" (a generative model served
without --pooling), in one process.

What it proves (the wire contract):
  * the response objects (list / embedding / index / model / usage), unit-length vectors of the
    model's 384 dimensions, usage counting the tokens /tokenize gives;
  * encoding_format: JSON floats by default on the wire; "base64" is little-endian float32 whose
    bits the JSON floats read back to exactly; the SDK (which asks for base64 when no format is
    given and decodes it itself, and returns the base64 string untouched when asked explicitly);
  * batches keep order and index and give each input's single-request vector; token-id input
    (a list, or a list of lists) is used exactly as given (no [CLS] / [SEP] added) and the ids
    /tokenize returns give the string's vector bitwise; `dimensions` truncates and renormalizes;
    `user` is accepted and ignored; 2048 inputs are accepted;
  * errors as 400 in OpenAI's shape with their param: empty string, empty array, empty token
    array, 2049 inputs, ids outside the vocabulary, malformed input, unknown encoding_format,
    dimensions out of 1..384, inputs over 512 tokens (the message names the input's index and
    token count; a flat token-id array is one input, refused for its length, not its item count),
    chat and text completions to the embedding model, embeddings from a generative model served
    without --pooling; an unknown model is a 404;
  * /v1/models kinds ("embedding" with embedding_dimensions and max_model_len), the Prometheus
    counters triad_embedding_requests_total / triad_embedding_input_tokens_total, the conversion
    cache under $TRIAD_HOME/converted, and two cosines sentence-transformers publishes for this
    model (an end-to-end numeric sanity check; tests/golden/test_embeddings.py is the full one);
  * `--pooling mean` on stories260K: unit vectors of its n_embd (64) dimensions, equal to the mean
    of the numpy reference's final-norm hidden states (tests/reference/ref_model.py), and bitwise
    the same whether the input is alone, inside batches of other inputs, or among concurrent
    requests (results do not depend on load).
"""
from __future__ import annotations

import base64
import concurrent.futures as cf
import sys
from pathlib import Path

import numpy as np
import openai
import pytest

from conftest import MODELS_DIR, STORIES, Server, need
from test_openai_sdk import check_error, client, httpx, metric, raw

ROOT = Path(__file__).resolve().parents[2]
MINILM = MODELS_DIR / "all-MiniLM-L6-v2"
N_EMBD = 384
N_CTX = 512
N_VOCAB = 30522
STORIES_EMBD = 64
BATCH_TOL = 1e-6   # a vector computed in a batch vs alone (max |difference|)

TEXTS = [
    "A man is eating food.",
    "Le café était très bon; naïve façade, Ærøskøbing and Straße.",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Emoji 👍🏽 and a family 👨‍👩‍👧‍👦 in text",
    "def f(x):\n    return x ** 2  # square",
]


@pytest.fixture(scope="module")
def triad_home(tmp_path_factory):
    return tmp_path_factory.mktemp("triad-home")


@pytest.fixture(scope="module")
def emb_server(triad_home):
    """all-MiniLM-L6-v2 (from its folder) as 'minilm' and stories260K as 'stories'."""
    need(MINILM / "model.safetensors")
    need(STORIES)
    s = Server(["-m", str(MINILM), "--alias", "minilm", "-m", str(STORIES), "--alias", "stories",
                "--kv-cache-memory", "256MiB"], env={"TRIAD_HOME": str(triad_home)})
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-30:])


@pytest.fixture(scope="module")
def pooled_server():
    """stories260K served with --pooling mean (a generative model producing embeddings)."""
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--pooling", "mean", "--kv-cache-memory", "64MiB"])
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-30:])


# ---- helpers


def post(s, body: dict, timeout=30) -> dict:
    """A successful POST /v1/embeddings (raw HTTP): the parsed body."""
    r = raw(s, "/v1/embeddings", body, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()


def vectors(body: dict) -> np.ndarray:
    """float32 [n, dim] of a response's data (base64 or JSON floats), checking index order."""
    assert body["object"] == "list"
    assert [d["index"] for d in body["data"]] == list(range(len(body["data"])))
    out = []
    for d in body["data"]:
        assert d["object"] == "embedding"
        e = d["embedding"]
        if isinstance(e, str):
            out.append(np.frombuffer(base64.b64decode(e), dtype="<f4"))
        else:
            assert all(isinstance(x, (int, float)) for x in e)
            out.append(np.asarray(e, dtype=np.float64).astype(np.float32))
    return np.stack(out)


def embed(s, inp, model="minilm", fmt="base64", **kw) -> np.ndarray:
    """float32 [n, dim] embeddings of one request (base64: the exact bits)."""
    return vectors(post(s, {"model": model, "input": inp, "encoding_format": fmt, **kw}))


def tokenize(s, text: str, model="minilm") -> list:
    r = httpx.post(s.base + "/tokenize", json={"model": model, "prompt": text, "add_special_tokens": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == len(body["tokens"])
    return body["tokens"]


def unit(v) -> bool:
    return abs(float(np.linalg.norm(np.asarray(v, dtype=np.float64))) - 1.0) <= 1e-5


def cos(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def sdk_error(c, **kw) -> dict:
    """The error object of an embeddings call that must be a 400 (openai.BadRequestError)."""
    with pytest.raises(openai.BadRequestError) as e:
        c.embeddings.create(**kw)
    assert e.value.status_code == 400
    err = e.value.response.json()["error"]
    assert e.value.body == err, "the SDK's body is the error object"
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert err["type"] == "invalid_request_error", err
    return err


# ---- models, conversion cache, metrics


def test_models_list_kinds(emb_server):
    r = httpx.get(emb_server.base_url + "/models")
    assert r.status_code == 200
    models = {m["id"]: m for m in r.json()["data"]}
    assert set(models) == {"minilm", "stories"}
    m = models["minilm"]
    assert m["kind"] == "embedding" and m["embedding_dimensions"] == N_EMBD and m["max_model_len"] == N_CTX, m
    s = models["stories"]
    assert s["kind"] in ("chat", "base"), s
    assert s.get("embedding_dimensions") is None, s
    # The SDK's model objects carry the extra fields.
    listed = {x.id: x for x in client(emb_server).models.list().data}
    assert getattr(listed["minilm"], "kind", None) == "embedding"


def test_folder_converted_once_into_triad_home(emb_server, triad_home):
    cached = list((triad_home / "converted").glob("all-MiniLM-L6-v2*.gguf"))
    assert len(cached) == 1, list((triad_home / "converted").iterdir())


def test_metrics_count_requests_and_tokens(emb_server):
    c = client(emb_server)
    c.embeddings.create(model="minilm", input="warm up", encoding_format="float")  # counters exist
    req0 = metric(emb_server, "triad_embedding_requests_total", "minilm")
    tok0 = metric(emb_server, "triad_embedding_input_tokens_total", "minilm")
    r = c.embeddings.create(model="minilm", input=TEXTS[:2], encoding_format="float")
    assert metric(emb_server, "triad_embedding_requests_total", "minilm") == req0 + 1
    assert metric(emb_server, "triad_embedding_input_tokens_total", "minilm") == tok0 + r.usage.prompt_tokens


# ---- results


def test_float_embedding(emb_server):
    c = client(emb_server)
    r = c.embeddings.create(model="minilm", input=TEXTS[0], encoding_format="float")
    assert r.object == "list" and r.model == "minilm" and len(r.data) == 1
    d = r.data[0]
    assert d.object == "embedding" and d.index == 0
    assert isinstance(d.embedding, list) and len(d.embedding) == N_EMBD
    assert all(isinstance(x, (int, float)) for x in d.embedding)
    assert np.all(np.isfinite(d.embedding)) and unit(d.embedding)
    n = len(tokenize(emb_server, TEXTS[0]))
    assert r.usage.prompt_tokens == n and r.usage.total_tokens == n


def test_published_similarities(emb_server):
    """Cosines sentence-transformers publishes for all-MiniLM-L6-v2 (4 decimals, PyTorch)."""
    e = embed(emb_server, ["A man is eating pasta.", "A man is eating food.", "A man is riding a horse."])
    assert abs(cos(e[0], e[1]) - 0.7035) <= 1e-4, cos(e[0], e[1])
    assert abs(cos(e[0], e[2]) - 0.1889) <= 1e-4, cos(e[0], e[2])


def test_base64_encoding(emb_server):
    c = client(emb_server)
    floats = np.asarray(c.embeddings.create(model="minilm", input=TEXTS[1], encoding_format="float").data[0].embedding,
                        dtype=np.float64)
    # The JSON floats, read as float32, are the base64 bits (the server prints float32 losslessly).
    f32 = floats.astype(np.float32)
    # Asked explicitly, the SDK returns the base64 string as the server sent it.
    b = c.embeddings.create(model="minilm", input=TEXTS[1], encoding_format="base64").data[0].embedding
    assert isinstance(b, str)
    raw_bytes = base64.b64decode(b, validate=True)
    assert len(raw_bytes) == 4 * N_EMBD
    assert np.array_equal(np.frombuffer(raw_bytes, dtype="<f4"), f32)
    # Without encoding_format the SDK requests base64 and decodes it into floats itself.
    d = c.embeddings.create(model="minilm", input=TEXTS[1]).data[0].embedding
    assert isinstance(d, list) and np.array_equal(np.asarray(d, dtype=np.float32), f32)
    # Raw HTTP: the default is JSON floats; base64 decodes with numpy '<f4' to the same values.
    body = post(emb_server, {"model": "minilm", "input": TEXTS[1]})
    assert isinstance(body["data"][0]["embedding"], list)
    assert np.array_equal(vectors(body)[0], f32)
    body = post(emb_server, {"model": "minilm", "input": TEXTS[1], "encoding_format": "base64"})
    assert isinstance(body["data"][0]["embedding"], str)
    assert np.array_equal(vectors(body)[0], f32)


def test_batch_keeps_order_and_index(emb_server):
    c = client(emb_server)
    r = c.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    assert [d.index for d in r.data] == list(range(len(TEXTS)))
    counts = [len(tokenize(emb_server, t)) for t in TEXTS]
    assert r.usage.prompt_tokens == sum(counts) and r.usage.total_tokens == sum(counts)
    batch = np.asarray([d.embedding for d in r.data], dtype=np.float32)
    for i, t in enumerate(TEXTS):
        alone = embed(emb_server, t)[0]
        assert np.abs(batch[i] - alone).max() <= BATCH_TOL, f"input {i} differs in the batch"
    # Distinct inputs give distinct vectors (no row was copied into another).
    for i in range(len(TEXTS)):
        for j in range(i):
            assert cos(batch[i], batch[j]) < 0.999, (i, j)


def test_token_id_input(emb_server):
    ids = [tokenize(emb_server, t) for t in TEXTS[:3]]
    strings = embed(emb_server, TEXTS[:3])
    # A single list of ids: the string's vector, bitwise (the same ids, alone).
    one = post(emb_server, {"model": "minilm", "input": ids[0], "encoding_format": "base64"})
    assert one["usage"]["prompt_tokens"] == len(ids[0])
    assert np.array_equal(vectors(one)[0], embed(emb_server, TEXTS[0])[0])
    # A list of lists: each the string's vector (same batch shape as `strings`).
    many = post(emb_server, {"model": "minilm", "input": ids, "encoding_format": "base64"})
    assert many["usage"]["prompt_tokens"] == sum(map(len, ids))
    assert np.abs(vectors(many) - strings).max() <= BATCH_TOL
    # Through the SDK too.
    sdk = client(emb_server).embeddings.create(model="minilm", input=ids, encoding_format="float")
    assert np.abs(np.asarray([d.embedding for d in sdk.data], dtype=np.float32) - strings).max() <= BATCH_TOL
    # Nothing is added to token ids: without [CLS] / [SEP] it is another input.
    assert ids[0][0] == 101 and ids[0][-1] == 102, "[CLS] ... [SEP]"
    bare = post(emb_server, {"model": "minilm", "input": [ids[0][1:-1]], "encoding_format": "base64"})
    assert bare["usage"]["prompt_tokens"] == len(ids[0]) - 2
    assert cos(vectors(bare)[0], strings[0]) < 1 - 1e-4


def test_dimensions(emb_server):
    full = embed(emb_server, TEXTS[2])[0].astype(np.float64)
    for d in (1, 64, 383, N_EMBD):
        r = client(emb_server).embeddings.create(model="minilm", input=TEXTS[2], dimensions=d, encoding_format="float")
        v = np.asarray(r.data[0].embedding, dtype=np.float64)
        assert v.shape == (d,) and unit(v)
        want = full[:d] / np.linalg.norm(full[:d])
        assert np.abs(v - want).max() <= 1e-6, f"dimensions={d}"
    b = embed(emb_server, TEXTS[2], dimensions=64)
    assert b.shape == (1, 64) and unit(b[0])


def test_user_is_ignored(emb_server):
    a = embed(emb_server, TEXTS[3])
    r = client(emb_server).embeddings.create(model="minilm", input=TEXTS[3], user="user-1234", encoding_format="base64")
    assert np.array_equal(np.frombuffer(base64.b64decode(r.data[0].embedding), dtype="<f4"), a[0])


def test_2048_inputs_accepted(emb_server):
    ids = [101, 102]  # [CLS] [SEP]: the embedding of an empty text, 2048 times
    # 4096 tokens in one request: over 30 s under ASan on a 2-core AVX2-only Zen 3 (the CI kind
    # varies), so this one request gets 300.
    e = vectors(post(emb_server, {"model": "minilm", "input": [ids] * 2048, "encoding_format": "base64"}, timeout=300))
    assert e.shape == (2048, N_EMBD)
    assert np.abs(e - e[0]).max() <= BATCH_TOL


# ---- errors

TOO_LONG = "word " * 600  # 602 tokens with [CLS] and [SEP]

ERRORS = [
    ("empty string", {"input": ""}, "input"),
    ("empty string in array", {"input": ["fine", ""]}, "input"),
    ("empty array", {"input": []}, "input"),
    ("empty token array", {"input": [[]]}, "input"),
    ("empty inner token array", {"input": [[101, 102], []]}, "input"),
    ("2049 strings", {"input": ["a"] * 2049}, "input"),
    ("2049 token arrays", {"input": [[101, 102]] * 2049}, "input"),
    ("token id = vocabulary size", {"input": [101, N_VOCAB, 102]}, "input"),
    ("negative token id", {"input": [[101, -1, 102]]}, "input"),
    ("huge token id", {"input": [[101, 2**40, 102]]}, "input"),
    ("mixed strings and ids", {"input": ["a", 1]}, "input"),
    ("mixed ids and arrays", {"input": [1, [2]]}, "input"),
    ("float token", {"input": [1.5]}, "input"),
    ("nested too deep", {"input": [[[101]]]}, "input"),
    ("input a number", {"input": 5}, "input"),
    ("input an object", {"input": {"text": "a"}}, "input"),
    ("encoding_format int8", {"input": "a", "encoding_format": "int8"}, "encoding_format"),
    ("dimensions 0", {"input": "a", "dimensions": 0}, "dimensions"),
    ("dimensions -1", {"input": "a", "dimensions": -1}, "dimensions"),
    ("dimensions 385", {"input": "a", "dimensions": N_EMBD + 1}, "dimensions"),
    ("dimensions a string", {"input": "a", "dimensions": "64"}, "dimensions"),
    ("over 512 tokens", {"input": TOO_LONG}, "input"),
    ("513 token ids", {"input": [[101] + [1037] * 511 + [102]]}, "input"),
]


@pytest.mark.parametrize("name,body,param", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(emb_server, name, body, param):
    err = sdk_error(client(emb_server), model="minilm", **body)
    assert err["param"] == param, err
    # The same through raw HTTP (the SDK adds encoding_format base64 when it is not given).
    check_error(raw(emb_server, "/v1/embeddings", {"model": "minilm", **body}), 400, None, param)
    assert httpx.get(emb_server.base + "/health").status_code == 200


def test_missing_input(emb_server):
    check_error(raw(emb_server, "/v1/embeddings", {"model": "minilm"}), 400, None, "input")


def test_over_long_input_names_index_and_count(emb_server):
    n = len(tokenize(emb_server, TOO_LONG))
    assert n == 602
    err = sdk_error(client(emb_server), model="minilm", input=[TEXTS[0], TEXTS[1], TOO_LONG])
    assert err["param"] == "input" and "input[2]" in err["message"] and str(n) in err["message"], err
    err = sdk_error(client(emb_server), model="minilm", input=[TOO_LONG])
    assert "input[0]" in err["message"] and str(n) in err["message"], err
    ids = [[101] + [1037] * 511 + [102]]
    err = sdk_error(client(emb_server), model="minilm", input=[[101, 102]] * 3 + ids)
    assert "input[3]" in err["message"] and str(N_CTX + 1) in err["message"], err
    # 512 is the limit, not past it.
    e = embed(emb_server, [[101] + [1037] * 510 + [102]])
    assert e.shape == (1, N_EMBD) and unit(e[0])


def test_flat_token_array_is_one_input(emb_server):
    # A flat token-id array is ONE input however long: the 2048-item limit is for arrays of
    # inputs. No model served here has a context over 2048, so 3000 ids must get the per-input
    # length error (input[0], its token count, context_length_exceeded), not the item-count one.
    ids = [101] + [1037] * 2998 + [102]
    r = raw(emb_server, "/v1/embeddings", {"model": "minilm", "input": ids})
    check_error(r, 400, "context_length_exceeded", "input")
    msg = r.json()["error"]["message"]
    assert "input[0]" in msg and "3000" in msg and str(N_CTX) in msg and "items" not in msg, msg
    # 2049 ids are one input too (an array of 2049 inputs is refused for its count instead).
    r = raw(emb_server, "/v1/embeddings", {"model": "minilm", "input": [101] + [1037] * 2047 + [102]})
    check_error(r, 400, "context_length_exceeded", "input")


def test_generation_on_the_embedding_model_is_400(emb_server):
    c = client(emb_server)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="minilm", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert e.value.param == "model", e.value.body
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="minilm", prompt="hi", max_tokens=4)
    assert e.value.param == "model", e.value.body


def test_embeddings_from_generative_model_need_pooling(emb_server):
    err = sdk_error(client(emb_server), model="stories", input="Once upon a time", encoding_format="float")
    assert err["param"] == "model", err
    # The generative model still generates.
    r = client(emb_server).chat.completions.create(model="stories", messages=[{"role": "user", "content": "Once"}],
                                                   max_tokens=4, temperature=0)
    assert r.usage.completion_tokens > 0


def test_unknown_model_is_404(emb_server):
    with pytest.raises(openai.NotFoundError) as e:
        client(emb_server).embeddings.create(model="nope", input="a", encoding_format="float")
    assert e.value.code == "model_not_found"


# ---- --pooling on a generative model

STORY_TEXTS = [
    "Once upon a time there was a little girl named Lily.",
    "The cat sat on the mat.",
    "Tom and his dog went to the park to play with a red ball.",
    "She was happy.",
    "One day, a big bird flew over the house and sang a song.",
]


def reference_mean_pooled(ids) -> np.ndarray:
    """The numpy reference's final-norm hidden states of stories260K, mean-pooled, unit length."""
    pytest.importorskip("gguf")
    ref_dir = str(ROOT / "tests" / "reference")
    if ref_dir not in sys.path:
        sys.path.insert(0, ref_dir)
    import ref_model

    class Hidden(ref_model.RefModel):
        """forward() returns the final-norm hidden states: the output projection is skipped."""

        def _linear(self, x, name):
            return x if name == self.output_matrix_name() else super()._linear(x, name)

    h = Hidden(str(STORIES)).forward(ids)
    assert h.shape == (len(ids), STORIES_EMBD)
    v = h.mean(axis=0)
    return v / np.linalg.norm(v)


def test_pooling_mean_unit_vectors_of_n_embd(pooled_server):
    body = post(pooled_server, {"model": "stories", "input": STORY_TEXTS[0], "encoding_format": "float"})
    assert body["model"] == "stories"
    v = vectors(body)[0]
    assert v.shape == (STORIES_EMBD,) and np.all(np.isfinite(v)) and unit(v)
    ids = tokenize(pooled_server, STORY_TEXTS[0], model="stories")
    assert body["usage"]["prompt_tokens"] == len(ids)
    # Token ids give the same vector as the text.
    assert np.array_equal(embed(pooled_server, ids, model="stories")[0], embed(pooled_server, STORY_TEXTS[0], model="stories")[0])
    # dimensions is bounded by n_embd.
    assert embed(pooled_server, STORY_TEXTS[0], model="stories", dimensions=16).shape == (1, 16)
    check_error(raw(pooled_server, "/v1/embeddings", {"model": "stories", "input": "a", "dimensions": STORIES_EMBD + 1}),
                400, None, "dimensions")


def test_pooling_mean_matches_reference(pooled_server):
    for t in STORY_TEXTS[:3]:
        ids = tokenize(pooled_server, t, model="stories")
        got = embed(pooled_server, ids, model="stories")[0]
        c = cos(got, reference_mean_pooled(ids))
        assert c >= 0.9999, f"{t!r}: cosine {c:.6f} with the reference"


def test_pooling_results_do_not_depend_on_load(pooled_server):
    s = pooled_server
    target = STORY_TEXTS[0]
    alone = embed(s, target, model="stories")[0]
    others = STORY_TEXTS[1:]
    # Inside batches of other inputs, at several positions.
    for k in range(len(others) + 1):
        batch = others[:k] + [target] + others[k:]
        got = embed(s, batch, model="stories")
        assert np.array_equal(got[k], alone), f"position {k} of a batch of {len(batch)}"
    # Among concurrent requests (which the server may run in one step).
    reqs = [[target] if i % 2 == 0 else others[i % len(others):] + [target] for i in range(12)]
    with cf.ThreadPoolExecutor(6) as ex:
        results = list(ex.map(lambda inp: embed(s, inp, model="stories")[-1], reqs))
    for i, got in enumerate(results):
        assert np.array_equal(got, alone), f"concurrent request {i}"
    # And distinct inputs are distinct vectors.
    all_ = embed(s, STORY_TEXTS, model="stories")
    for i in range(len(STORY_TEXTS)):
        for j in range(i):
            assert not np.array_equal(all_[i], all_[j])

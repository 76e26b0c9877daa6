"""Prompt logprobs: /v1/completions with echo and logprobs (every prompt token's logprob and
top-N, the first null, with text offsets; max_tokens 0 allowed), vLLM's prompt_logprobs on both
endpoints, and lm-evaluation-harness (PyPI lm-eval, `local-completions`) scoring a
multiple-choice task from a local file: its accuracy must equal the same scoring computed
directly from `triad eval-logits`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import BIN, STORIES, Server, need
from test_openai_sdk import client, httpx


@pytest.fixture(scope="module")
def f32_server():
    """stories260K with an F32 KV cache, so that the server's logprobs and eval-logits (which
    keeps F32 K/V) run the same arithmetic."""
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--cache-type-k", "f32", "--cache-type-v", "f32"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def post(s, path, body):
    r = httpx.post(s.base_url + path if not path.startswith("/tokenize") else s.base + path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def eval_logprobs(tokens: list[int]) -> np.ndarray:
    """log-softmax of every position's logits, from `triad eval-logits` (the same forward pass, but
    one whole sequence on a private f32 KV store, outside the engine's scheduling, batching and
    prefix cache)."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"triad_eval_logits_{os.getpid()}.f32"
    subprocess.run([BIN, "eval-logits", "-m", str(STORIES), "--tokens", ",".join(map(str, tokens)), "--out", str(out)],
                   check=True, capture_output=True)
    logits = np.fromfile(out, dtype=np.float32).reshape(len(tokens), -1).astype(np.float64)
    out.unlink()
    m = logits.max(axis=1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))


TEXT = "Once upon a time there was a little girl named Lily. She loved to play with her red ball."


def test_echo_logprobs_cover_the_prompt(f32_server):
    s = f32_server
    ids = post(s, "/tokenize", {"prompt": TEXT})["tokens"]
    ls = eval_logprobs(ids)
    r = post(s, "/completions", {"model": "stories", "prompt": TEXT, "echo": True, "logprobs": 3, "max_tokens": 0})
    ch = r["choices"][0]
    assert ch["text"] == TEXT and ch["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 0
    lp = ch["logprobs"]
    assert len(lp["tokens"]) == len(ids) == r["usage"]["prompt_tokens"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    want = [ls[i, ids[i + 1]] for i in range(len(ids) - 1)]
    assert np.max(np.abs(np.array(lp["token_logprobs"][1:]) - want)) < 1e-4
    for i, top in enumerate(lp["top_logprobs"][1:]):
        assert len(top) == 3
        best = np.sort(ls[i])[::-1][:3]
        assert np.allclose(sorted(top.values(), reverse=True), best, atol=1e-4)
    # text_offset: where each token's text starts in the echoed text (the decoded tokens before it)
    assert lp["text_offset"] == [len(post(s, "/detokenize", {"tokens": ids[:i]})["prompt"].encode()) for i in range(len(ids))]
    assert lp["text_offset"][-1] == len(TEXT) - len(lp["tokens"][-1])
    # With generated tokens, their entries follow the prompt's, offsets continuing after it.
    r = post(s, "/completions", {"model": "stories", "prompt": TEXT, "echo": True, "logprobs": 1, "max_tokens": 4,
                                 "temperature": 0})
    lp = r["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(ids) + 4 and lp["text_offset"][len(ids)] == len(TEXT)
    # A prefix-cache hit must not lose the prompt's logprobs.
    again = post(s, "/completions", {"model": "stories", "prompt": TEXT, "echo": True, "logprobs": 1, "max_tokens": 0})
    assert again["choices"][0]["logprobs"]["token_logprobs"] == r["choices"][0]["logprobs"]["token_logprobs"][:len(ids)]
    # max_tokens 0 needs echo
    bad = httpx.post(s.base_url + "/completions", json={"model": "stories", "prompt": TEXT, "max_tokens": 0})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_tokens"


def test_the_token_that_ends_the_answer_is_listed(f32_server):
    """As OpenAI's legacy completions (and lm-eval's [ctxlen:-1] slice) expect: with logprobs, the
    end-of-generation token that stops the answer is the last entry."""
    s = f32_server
    ids = post(s, "/tokenize", {"prompt": TEXT})["tokens"]
    eos = 2  # stories260K's </s>
    r = post(s, "/completions", {"model": "stories", "prompt": TEXT, "echo": True, "logprobs": 1, "max_tokens": 1,
                                 "logit_bias": {str(eos): 100}})
    ch = r["choices"][0]
    assert ch["finish_reason"] == "stop" and ch["text"] == TEXT
    assert len(ch["logprobs"]["token_logprobs"]) == len(ids) + 1 and r["usage"]["completion_tokens"] == 1


def test_echo_logprobs_through_the_sdk(f32_server):
    c = client(f32_server)
    r = c.completions.create(model="stories", prompt=TEXT, echo=True, logprobs=2, max_tokens=0)
    lp = r.choices[0].logprobs
    assert r.choices[0].text == TEXT and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert len(lp.tokens) == r.usage.prompt_tokens and all(len(t) == 2 for t in lp.top_logprobs[1:])
    r2 = c.completions.create(model="stories", prompt=TEXT, echo=True, logprobs=0, max_tokens=3, temperature=0)
    lp2 = r2.choices[0].logprobs
    assert lp2.token_logprobs[:len(lp.tokens)] == lp.token_logprobs and len(lp2.tokens) == len(lp.tokens) + 3
    assert r2.choices[0].text.startswith(TEXT)


def test_vllm_prompt_logprobs_on_both_endpoints(f32_server):
    s = f32_server
    ids = post(s, "/tokenize", {"prompt": TEXT})["tokens"]
    ls = eval_logprobs(ids)
    r = post(s, "/completions", {"model": "stories", "prompt": ids, "prompt_logprobs": 2, "max_tokens": 1, "n": 2})
    for ch in r["choices"]:
        pl = ch["prompt_logprobs"]
        assert pl[0] is None and len(pl) == len(ids)
        for i, entry in enumerate(pl[1:]):
            own = entry[str(ids[i + 1])]
            assert abs(own["logprob"] - ls[i, ids[i + 1]]) < 1e-4
            assert own["rank"] == 1 + int((ls[i] > ls[i, ids[i + 1]]).sum())
            assert 2 <= len(entry) <= 3
    r = post(s, "/chat/completions", {"model": "stories", "messages": [{"role": "user", "content": "Hi"}],
                                      "prompt_logprobs": 0, "max_tokens": 1})
    assert r["prompt_logprobs"][0] is None and len(r["prompt_logprobs"]) == r["usage"]["prompt_tokens"]
    bad = httpx.post(s.base_url + "/completions", json={"model": "stories", "prompt": "x", "prompt_logprobs": 1, "stream": True})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt_logprobs"
    info = httpx.get(s.base + "/tokenizer_info").json()
    assert info["eos_token"] and info["model"] == "stories"


DOCS = [
    ("Lily went to the park. She played with her", ["ball", "moon", "shoe"], 0),
    ("Tom was hungry, so he ate an", ["apple", "car", "cloud"], 0),
    ("The sun was hot and the sky was", ["blue", "sad", "seven"], 0),
    ("The cat saw a mouse and ran after the", ["mouse", "tree", "song"], 0),
    ("Once upon a time there was a little", ["girl", "table", "run"], 0),
    ("Sam was sad because he lost his", ["toy", "happy", "jump"], 0),
    ("The bird flew up into the", ["sky", "spoon", "bed"], 0),
    ("Mom said it was time for", ["bed", "purple", "fast"], 0),
    ("They went to the beach and played in the", ["sand", "book", "lamp"], 1),
    ("The dog wagged its", ["tail", "hat", "door"], 2),
    ("Ben wanted to build a big", ["tower", "sleep", "green"], 0),
    ("At night the stars were", ["shining", "eating", "ladder"], 1),
]


def lm_eval_available() -> bool:
    try:
        import lm_eval  # noqa: F401
        return True
    except ImportError:
        return False


def expected_scores(s) -> tuple[float, list[list[float]]]:
    """The task scored from eval-logits: lm-eval's split of context and continuation (the
    continuation is " " + choice, tokenized with the context and cut at the context's tokens,
    no BOS), summed logprobs of the continuation's tokens, the best choice. Returns the accuracy
    and every choice's score."""
    correct, all_scores = 0, []
    for question, choices, gold in DOCS:
        ctx = post(s, "/tokenize", {"prompt": question, "add_special_tokens": False})["tokens"]
        scores = []
        for choice in choices:
            whole = post(s, "/tokenize", {"prompt": question + " " + choice, "add_special_tokens": False})["tokens"]
            cont = whole[len(ctx):]
            ls = eval_logprobs(ctx + cont)
            scores.append(sum(ls[len(ctx) - 1 + k, cont[k]] for k in range(len(cont))))
        correct += int(np.argmax(scores)) == gold
        all_scores.append(scores)
    return correct / len(DOCS), all_scores


@pytest.mark.skipif(not lm_eval_available(), reason="lm-eval is not installed (scripts/setup.sh installs it)")
def test_lm_eval_local_completions_matches_eval_logits(f32_server, tmp_path):
    s = f32_server
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "label": g}) + "\n" for q, c, g in DOCS))
    (tmp_path / "triad_local_mc.yaml").write_text(f"""task: triad_local_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
""")
    out = tmp_path / "out"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "OPENAI_API_KEY": "none"}
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions",
           "--model_args", f"model=stories,base_url={s.base_url}/completions,num_concurrent=1,max_retries=1,"
                           "tokenized_requests=True,tokenizer_backend=remote",
           "--tasks", "triad_local_mc", "--include_path", str(tmp_path), "--output_path", str(out), "--log_samples"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = list(out.rglob("results_*.json"))
    assert results, p.stdout[-2000:]
    acc = json.loads(results[0].read_text())["results"]["triad_local_mc"]["acc,none"]
    want, scores = expected_scores(s)
    print(f"lm-eval accuracy {acc}, eval-logits accuracy {want}")
    assert acc == pytest.approx(want, abs=1e-9)
    assert want > 0
    # Each choice's loglikelihood as lm-eval read it from the server equals eval-logits' sum.
    samples = [json.loads(line) for f in out.rglob("samples_*.jsonl") for line in f.read_text().splitlines()]
    assert len(samples) == len(DOCS)
    for smp in samples:
        got = [float(r[0][0]) for r in smp["resps"]]  # [[loglikelihood, is_greedy]] per choice, as text
        assert np.allclose(got, scores[smp["doc_id"]], atol=1e-3), (got, scores[smp["doc_id"]])

"""Speculative decoding through the API: per-request control (num_speculative_tokens, OpenAI's
`prediction`), the usage fields the official SDK reads (completion_tokens_details.accepted /
rejected_prediction_tokens, streamed and not), the metrics, and bad values as 400s. The tokens
themselves are checked against decoding without drafts in tests/unit/engine_test.cpp and, for
every weight type, batched, in test_determinism.py."""
from __future__ import annotations

import re

import openai
import pytest

from test_openai_sdk import client, httpx, metric


def source_metric(s, name: str, model: str, source: str) -> float:
    text = httpx.get(s.base + "/metrics").text
    m = re.search(rf'^{name}{{model="{model}",source="{source}"}} ([0-9.e+-]+)$', text, re.M)
    assert m, f"{name} for {source} missing from /metrics"
    return float(m.group(1))


def ask(s, **extra):
    body = {"model": "stories", "prompt": "Once upon a time, there was a little girl named Lily.", "max_tokens": 48,
            "temperature": 0, "ignore_eos": True, **extra}
    r = httpx.post(s.base_url + "/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_prediction_and_per_request_control(server):
    plain = ask(server, num_speculative_tokens=0)
    text = plain["choices"][0]["text"]
    d = plain["usage"]["completion_tokens_details"]
    assert d["accepted_prediction_tokens"] == 0 and d["rejected_prediction_tokens"] == 0
    drafted = metric(server, "triad_spec_decode_draft_tokens_total", "stories")
    accepted = metric(server, "triad_spec_decode_accepted_tokens_total", "stories")
    looked_up = source_metric(server, "triad_spec_decode_source_draft_tokens_total", "stories", "lookup")
    # The right answer as the prediction: most drafts are taken, the text is the same.
    pred = ask(server, prediction={"type": "content", "content": text})
    assert pred["choices"][0]["text"] == text
    d = pred["usage"]["completion_tokens_details"]
    assert d["accepted_prediction_tokens"] >= 24, d
    assert metric(server, "triad_spec_decode_draft_tokens_total", "stories") - drafted == \
        d["accepted_prediction_tokens"] + d["rejected_prediction_tokens"]
    assert metric(server, "triad_spec_decode_accepted_tokens_total", "stories") - accepted == \
        d["accepted_prediction_tokens"]
    # A prediction is drafted by lookup; this server has no draft model.
    assert source_metric(server, "triad_spec_decode_source_draft_tokens_total", "stories", "lookup") - looked_up == \
        d["accepted_prediction_tokens"] + d["rejected_prediction_tokens"]
    assert source_metric(server, "triad_spec_decode_source_draft_tokens_total", "stories", "draft_model") == 0
    # A wrong prediction: drafts are refused, the text is still the same.
    wrong = ask(server, prediction={"type": "content", "content": "Tom had a big red ball. " * 8})
    assert wrong["choices"][0]["text"] == text
    # Turned off for one request despite a prediction: nothing is drafted.
    off = ask(server, prediction={"type": "content", "content": text}, num_speculative_tokens=0)
    assert off["choices"][0]["text"] == text
    assert off["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] == 0


def test_sdk_reads_the_usage_streamed_and_not(server):
    c = client(server)
    msgs = [{"role": "user", "content": "Tell me a story about a cat."}]
    r = c.chat.completions.create(model="stories", messages=msgs, max_tokens=40, temperature=0,
                                  extra_body={"ignore_eos": True})
    content = r.choices[0].message.content
    p = c.chat.completions.create(model="stories", messages=msgs, max_tokens=40, temperature=0,
                                  prediction={"type": "content", "content": content}, extra_body={"ignore_eos": True})
    assert p.choices[0].message.content == content
    assert p.usage.completion_tokens_details.accepted_prediction_tokens > 0
    chunks = list(c.chat.completions.create(model="stories", messages=msgs, max_tokens=40, temperature=0, stream=True,
                                            stream_options={"include_usage": True},
                                            prediction={"type": "content", "content": content},
                                            extra_body={"ignore_eos": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == content
    assert chunks[-1].usage.completion_tokens_details.accepted_prediction_tokens == \
        p.usage.completion_tokens_details.accepted_prediction_tokens


@pytest.mark.parametrize("extra, param", [
    ({"num_speculative_tokens": 33}, "num_speculative_tokens"),
    ({"num_speculative_tokens": -1}, "num_speculative_tokens"),
    ({"num_speculative_tokens": "4"}, "num_speculative_tokens"),
    ({"prediction": "text"}, "prediction"),
    ({"prediction": {"type": "image", "content": "x"}}, "prediction"),
    ({"prediction": {"type": "content"}}, "prediction"),
    ({"prediction": {"type": "content", "content": 5}}, "prediction.content"),
])
def test_bad_values_are_400s(server, extra, param):
    r = httpx.post(server.base_url + "/completions", json={"model": "stories", "prompt": "Hi", "max_tokens": 2, **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    with pytest.raises(openai.BadRequestError):
        client(server).completions.create(model="stories", prompt="Hi", max_tokens=2, extra_body=extra)


def test_draft_model_serving_and_its_errors(server):
    """--speculative draft: a draft model of the same vocabulary (stories260K drafting for
    itself) gives the same answers as the server without it, with drafts accepted; a draft
    model of another vocabulary or a missing --draft-model stop the start with a clear error."""
    from conftest import BIN, STORIES, TINY_LLAMA, Server
    import subprocess
    s = Server(["-m", str(STORIES), "--alias", "stories", "--speculative", "draft", "--draft-model", str(STORIES),
                "--draft-kv-memory", "16MiB"])
    try:
        want = ask(server, num_speculative_tokens=0)["choices"][0]["text"]
        got = ask(s)
        assert got["choices"][0]["text"] == want
        assert got["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] > 0
        # Each source's counts are their own and add up to the totals (/metrics and /stats).
        model_drafts = source_metric(s, "triad_spec_decode_source_draft_tokens_total", "stories", "draft_model")
        assert model_drafts > 0
        total = metric(s, "triad_spec_decode_draft_tokens_total", "stories")
        assert source_metric(s, "triad_spec_decode_source_draft_tokens_total", "stories", "lookup") + model_drafts == total
        spec = httpx.get(s.base + "/stats").json()["models"][0]["speculative"]
        assert spec["by_source"]["draft_model"]["draft_tokens"] == model_drafts
        assert spec["by_source"]["lookup"]["draft_tokens"] + model_drafts == spec["draft_tokens"] == total
        assert any("draft model" in line for line in s.log), "".join(s.log[-20:])
    finally:
        assert s.stop() == 0
    for args, msg in [
        (["--speculative", "draft", "--draft-model", str(TINY_LLAMA)], "vocabulary"),
        (["--speculative", "draft"], "--draft-model"),
        (["--draft-model", str(STORIES)], "--speculative draft"),
    ]:
        p = subprocess.run([BIN, "serve", "-m", str(STORIES), "--port", "0", *args], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode != 0
        assert msg in p.stdout + p.stderr, p.stdout + p.stderr

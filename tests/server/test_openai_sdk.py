"""The official `openai` SDK against a real `triad serve` on loopback: the wire contract
(objects, streaming, usage), parameters, stop strings, several models in one process, errors
in OpenAI's shape, authentication, cancellation on disconnect, concurrency and graceful
shutdown."""
from __future__ import annotations

import concurrent.futures as cf
import json
import re
import signal
import socket
import subprocess
import threading
import time

import openai
import pytest

from conftest import BIN, GEMMA, STORIES, Server, need

KEY = "sk-no-key-required"


class Resp:
    """A plain HTTP response (stdlib only, so the raw checks do not depend on the SDK's HTTP stack)."""

    def __init__(self, status: int, body: bytes, headers=None):
        self.status_code = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.content = body
        self.text = body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.text)


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 60) -> Resp:
    import urllib.error
    import urllib.request
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Resp(r.status, r.read(), dict(r.headers.items()))
    except urllib.error.HTTPError as e:
        return Resp(e.code, e.read(), dict(e.headers.items()))


class httpx:  # noqa: N801 - the few calls these tests make
    @staticmethod
    def get(url, timeout=60):
        return http("GET", url, timeout=timeout)

    @staticmethod
    def post(url, json=None, content=None, headers=None, timeout=60):
        import json as _json
        body = content if content is not None else _json.dumps(json).encode()
        if isinstance(body, str):
            body = body.encode()
        return http("POST", url, body, {"Content-Type": "application/json", **(headers or {})}, timeout)


def client(s, **kw):
    return openai.OpenAI(base_url=s.base_url, api_key=kw.pop("api_key", KEY), max_retries=0, timeout=120, **kw)


def cancelled(s, model: str) -> float:
    text = httpx.get(s.base + "/metrics").text
    m = re.search(rf'^triad_requests_total{{model="{model}",outcome="cancelled"}} ([0-9.e+-]+)$', text, re.M)
    assert m
    return float(m.group(1))


def metric(s, name: str, model: str) -> float:
    text = httpx.get(s.base + "/metrics").text
    m = re.search(rf'^{name}{{model="{model}"}} ([0-9.e+-]+)$', text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


# ---- models, health


def test_models_list_and_retrieve(server):
    c = client(server)
    ids = [m.id for m in c.models.list().data]
    assert ids == ["stories", "tiny"]
    m = c.models.retrieve("tiny")
    assert m.id == "tiny" and m.object == "model" and m.owned_by
    with pytest.raises(openai.NotFoundError) as e:
        c.models.retrieve("nope")
    assert e.value.code == "model_not_found"


def test_health_ready_metrics(server):
    h = httpx.get(server.base + "/health")
    assert h.status_code == 200 and h.json()["status"] == "ok"
    assert httpx.get(server.base + "/ready").status_code == 200
    text = httpx.get(server.base + "/metrics").text
    for name in ["triad_requests_running", "triad_requests_waiting", "triad_kv_cache_usage_ratio",
                 "triad_prefix_cache_queries_total", "triad_prefix_cache_hits_total", "triad_prompt_tokens_total",
                 "triad_generation_tokens_total", "triad_time_to_first_token_seconds_bucket",
                 "triad_inter_token_latency_seconds_bucket", "triad_e2e_request_latency_seconds_count",
                 "triad_request_queue_time_seconds_sum"]:
        assert f'{name}{{model="stories"' in text, name


# ---- chat completions


def test_chat_non_stream_object(server):
    c = client(server)
    r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "Once upon a time"}],
                                  max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "stories"
    assert isinstance(r.created, int)
    ch = r.choices[0]
    assert ch.index == 0 and ch.message.role == "assistant" and ch.finish_reason == "length"
    assert isinstance(ch.message.content, str) and ch.message.content
    assert r.usage.completion_tokens == 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12
    assert r.usage.prompt_tokens_details.cached_tokens >= 0


def test_content_parts_equal_string_content(server):
    c = client(server)
    a = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "The cat sat"}],
                                  max_tokens=8, temperature=0)
    b = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": [{"type": "text", "text": "The cat sat"}]}],
                                  max_tokens=8, temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == b.usage.prompt_tokens


def collect_stream(stream):
    text, chunks, finish, usage, roles = "", [], None, None, []
    for chunk in stream:
        chunks.append(chunk)
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
            assert chunk.choices == []
            continue
        for ch in chunk.choices:
            if ch.delta.role:
                roles.append(ch.delta.role)
            text += ch.delta.content or ""
            if ch.finish_reason:
                finish = ch.finish_reason
    return text, chunks, finish, usage, roles


def test_stream_equals_non_stream_for_a_seed(server):
    c = client(server)
    kw = dict(model="stories", messages=[{"role": "user", "content": "Lily went to the park"}], max_tokens=40,
              temperature=0.9, seed=1234)
    full = c.chat.completions.create(**kw)
    text, chunks, finish, usage, roles = collect_stream(
        c.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert roles == ["assistant"]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({ch.id for ch in chunks}) == 1 and len({ch.created for ch in chunks}) == 1
    assert usage.completion_tokens == full.usage.completion_tokens
    assert usage.prompt_tokens == full.usage.prompt_tokens
    # The role chunk first (empty content, as OpenAI), then one event per decode step: as many
    # content chunks as tokens.
    assert chunks[0].choices[0].delta.content == ""
    content_chunks = [ch for ch in chunks[1:] if ch.choices and ch.choices[0].finish_reason is None]
    assert len(content_chunks) == full.usage.completion_tokens


def test_usage_chunk_only_when_asked(server):
    c = client(server)
    _, chunks, _, usage, _ = collect_stream(c.chat.completions.create(
        model="stories", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, stream=True))
    assert usage is None and all(ch.usage is None for ch in chunks)


def test_stop_strings_across_tokens_never_leak(server):
    c = client(server)
    base = dict(model="stories", messages=[{"role": "user", "content": "Once upon a time"}], temperature=0)
    free = c.chat.completions.create(max_tokens=60, **base).choices[0].message.content
    # A stop string that starts inside a token and ends inside a later one.
    words = free.split(" ")
    assert len(words) > 8
    start = len(" ".join(words[:5])) + 2
    stop = free[start:start + 7]
    assert len(stop) == 7
    expect = free[:free.index(stop)]
    r = c.chat.completions.create(max_tokens=60, stop=[stop, "never-appears-xyz"], **base)
    assert r.choices[0].message.content == expect
    assert r.choices[0].finish_reason == "stop"
    text, _, finish, _, _ = collect_stream(c.chat.completions.create(max_tokens=60, stop=stop, stream=True, **base))
    assert text == expect and finish == "stop"
    assert stop not in text


def test_n_choices(server):
    c = client(server)
    r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "A dog"}], max_tokens=10,
                                  n=3, temperature=1.0, seed=7)
    assert [ch.index for ch in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == sum(1 for _ in range(3)) * 10
    seen = {}
    for chunk in c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "A dog"}],
                                           max_tokens=10, n=3, temperature=1.0, seed=7, stream=True):
        for ch in chunk.choices:
            seen[ch.index] = seen.get(ch.index, "") + (ch.delta.content or "")
    assert [seen[i] for i in range(3)] == [ch.message.content for ch in r.choices]


def test_sampling_parameters_are_accepted(server):
    c = client(server)
    r = c.chat.completions.create(
        model="stories", messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "Tom"}],
        max_completion_tokens=6, temperature=0.7, top_p=0.9, seed=3, presence_penalty=0.5, frequency_penalty=0.5,
        logit_bias={"13": -100}, user="someone", store=False, metadata={"k": "v"},
        extra_body={"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "ignore_eos": True, "unknown_field": 1})
    assert r.usage.completion_tokens == 6


def test_logprobs(server):
    c = client(server)
    r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "The sun"}], max_tokens=5,
                                  temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == 5
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[-1].logprob
        assert e.token == e.top_logprobs[0].token  # greedy picks the most likely


def test_two_models_in_one_process(server):
    c = client(server)
    a = c.completions.create(model="stories", prompt="Once upon a time", max_tokens=8, temperature=0)
    b = c.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8, temperature=0)
    assert a.model == "stories" and b.model == "tiny"
    assert a.choices[0].text != b.choices[0].text


# ---- legacy completions


def test_completions_forms(server):
    c = client(server)
    r = c.completions.create(model="stories", prompt="Once upon a time", max_tokens=10, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 10
    ids = c.completions.create(model="stories", prompt=[1, 403, 407, 261, 378], max_tokens=10, temperature=0)
    assert ids.choices[0].text == r.choices[0].text  # the same tokens as text
    multi = c.completions.create(model="stories", prompt=["Once upon a time", "Tom had"], max_tokens=5, n=2, temperature=0)
    assert [ch.index for ch in multi.choices] == [0, 1, 2, 3]
    assert multi.choices[0].text == multi.choices[1].text  # greedy: both choices of prompt 0 agree
    echo = c.completions.create(model="stories", prompt="Once upon a time", max_tokens=3, temperature=0, echo=True)
    assert echo.choices[0].text.startswith("Once upon a time")
    default = c.completions.create(model="stories", prompt="Once upon a time", temperature=0, extra_body={"ignore_eos": True})
    assert default.usage.completion_tokens == 16  # documented default max_tokens for /v1/completions
    lp = c.completions.create(model="stories", prompt="Once upon a time", max_tokens=4, temperature=0, logprobs=2)
    assert len(lp.choices[0].logprobs.tokens) == 4 and len(lp.choices[0].logprobs.top_logprobs[0]) == 2


def test_completions_stream(server):
    c = client(server)
    full = c.completions.create(model="stories", prompt="Tom and", max_tokens=20, temperature=0)
    text, usage = "", None
    for chunk in c.completions.create(model="stories", prompt="Tom and", max_tokens=20, temperature=0, stream=True,
                                      stream_options={"include_usage": True}):
        assert chunk.object == "text_completion"
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.text
    assert text == full.choices[0].text and usage.completion_tokens == 20


# ---- errors


def raw(s, path, body, headers=None, timeout=30):
    return httpx.post(s.base + path, content=body if isinstance(body, (bytes, str)) else json.dumps(body),
                      headers={"Content-Type": "application/json", **(headers or {})}, timeout=timeout)


def check_error(resp, status, code=None, param=None):
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if code:
        assert err["code"] == code, err
    if param:
        assert err["param"] == param, err


GOOD = {"model": "stories", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}

HOSTILE = [
    ("malformed JSON", b'{"model": "stories", "messages": [', 400, "invalid_json", None),
    ("not an object", b"[1, 2, 3]", 400, "invalid_json", None),
    ("missing messages", {"model": "stories"}, 400, "missing_required_parameter", "messages"),
    ("missing model", {"messages": [{"role": "user", "content": "x"}]}, 400, "missing_required_parameter", "model"),
    ("messages not a list", {**GOOD, "messages": "hi"}, 400, None, "messages"),
    ("bad role", {**GOOD, "messages": [{"role": "wizard", "content": "x"}]}, 400, None, "messages[0].role"),
    ("content wrong type", {**GOOD, "messages": [{"role": "user", "content": 5}]}, 400, None, "messages[0].content"),
    ("image part", {**GOOD, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, None, None),
    ("negative max_tokens", {**GOOD, "max_tokens": -1}, 400, None, "max_tokens"),
    ("zero max_tokens", {**GOOD, "max_tokens": 0}, 400, None, "max_tokens"),
    ("huge max_tokens", {**GOOD, "max_tokens": 10**12}, 400, None, "max_tokens"),
    ("max_tokens string", {**GOOD, "max_tokens": "10"}, 400, None, "max_tokens"),
    ("temperature below 0", {**GOOD, "temperature": -0.5}, 400, None, "temperature"),
    ("temperature huge", {**GOOD, "temperature": 1e308}, 400, None, "temperature"),
    ("temperature string", {**GOOD, "temperature": "hot"}, 400, None, "temperature"),
    ("top_p above 1", {**GOOD, "top_p": 1.5}, 400, None, "top_p"),
    ("n of a million", {**GOOD, "n": 10**6}, 400, None, "n"),
    ("n zero", {**GOOD, "n": 0}, 400, None, "n"),
    ("presence_penalty", {**GOOD, "presence_penalty": 5}, 400, None, "presence_penalty"),
    ("frequency_penalty", {**GOOD, "frequency_penalty": -1e9}, 400, None, "frequency_penalty"),
    ("huge logit_bias", {**GOOD, "logit_bias": {"5": 1e9}}, 400, None, "logit_bias"),
    ("logit_bias bad key", {**GOOD, "logit_bias": {"abc": 1}}, 400, None, "logit_bias"),
    ("logit_bias id out of vocab", {**GOOD, "logit_bias": {"99999999": 1}}, 400, None, "logit_bias"),
    ("top_logprobs without logprobs", {**GOOD, "top_logprobs": 3}, 400, None, "top_logprobs"),
    ("top_logprobs 50", {**GOOD, "logprobs": True, "top_logprobs": 50}, 400, None, "top_logprobs"),
    ("seed string", {**GOOD, "seed": "x"}, 400, None, "seed"),
    ("seed enormous", {**GOOD, "seed": 10**30}, 400, None, "seed"),
    ("five stop strings", {**GOOD, "stop": ["a", "b", "c", "d", "e"]}, 400, None, "stop"),
    ("stop not strings", {**GOOD, "stop": [1]}, 400, None, "stop"),
    ("unknown response_format", {**GOOD, "response_format": {"type": "yaml"}}, 400, None, "response_format"),
    ("response_format not an object", {**GOOD, "response_format": "json"}, 400, None, "response_format"),
    ("bad grammar", {**GOOD, "grammar": "root ::= ("}, 400, "invalid_grammar", "grammar"),
    ("tools not an array", {**GOOD, "tools": {"type": "function"}}, 400, None, "tools"),
    ("unknown model", {**GOOD, "model": "gpt-4o"}, 404, "model_not_found", "model"),
    ("context exceeded", {**GOOD, "messages": [{"role": "user", "content": "word " * 3000}]}, 400, "context_length_exceeded", None),
    ("prompt + max_tokens exceed", {**GOOD, "max_tokens": 2040}, 400, "context_length_exceeded", "max_tokens"),
    ("deep nesting", b'{"model": "stories", "messages": ' + b"[" * 100000 + b"]" * 100000 + b"}", 400, None, None),
]


@pytest.mark.parametrize("name,body,status,code,param", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_input(server, name, body, status, code, param):
    check_error(raw(server, "/v1/chat/completions", body), status, code, param)
    assert httpx.get(server.base + "/health").status_code == 200


def test_completions_errors(server):
    check_error(raw(server, "/v1/completions", {"model": "stories"}), 400, "missing_required_parameter", "prompt")
    check_error(raw(server, "/v1/completions", {"model": "stories", "prompt": [1, -5]}), 400, None, "prompt")
    check_error(raw(server, "/v1/completions", {"model": "stories", "prompt": []}), 400, None, "prompt")
    check_error(raw(server, "/v1/completions", {"model": "stories", "prompt": {"a": 1}}), 400, None, "prompt")


def test_body_over_the_limit_is_413(server):
    r = raw(server, "/v1/chat/completions", {**GOOD, "messages": [{"role": "user", "content": "x" * (2 << 20)}]})
    assert r.status_code == 413
    assert r.json()["error"]["message"]


def test_unknown_fields_are_ignored(server):
    r = raw(server, "/v1/chat/completions", {**GOOD, "service_tier": "auto", "verbosity": "low", "parallel_tool_calls": True,
                                             "reasoning_effort": "none", "frequency_penalty": None})
    assert r.status_code == 200, r.text


def test_unknown_route_and_method(server):
    assert httpx.get(server.base + "/v1/nothing").status_code == 404
    assert httpx.get(server.base + "/v1/chat/completions").status_code == 405


def test_sdk_raises_typed_errors(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}], temperature=-1)
    assert e.value.param == "temperature"
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="missing", messages=[{"role": "user", "content": "x"}])


# ---- cancellation, concurrency


def test_disconnect_mid_stream_frees_blocks(server):
    c = client(server)
    before = cancelled(server, "stories")
    other = cf.ThreadPoolExecutor(1).submit(
        lambda: client(server).chat.completions.create(model="stories", messages=[{"role": "user", "content": "Tom"}],
                                                       max_tokens=300, temperature=0, extra_body={"ignore_eos": True}))
    stream = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "Once"}], max_tokens=1900,
                                       stream=True, extra_body={"ignore_eos": True})
    got = 0
    for chunk in stream:
        got += 1
        if got == 5:
            break
    stream.close()  # the client goes away mid-stream
    r = other.result(timeout=120)  # the other request is unaffected
    assert r.usage.completion_tokens == 300
    deadline = time.time() + 10
    while time.time() < deadline and (metric(server, "triad_kv_cache_blocks_used", "stories") > 0
                                      or metric(server, "triad_requests_running", "stories") > 0):
        time.sleep(0.05)
    assert metric(server, "triad_kv_cache_blocks_used", "stories") == 0
    assert metric(server, "triad_requests_running", "stories") == 0
    assert cancelled(server, "stories") == before + 1  # cancelled, not run to its 1900 tokens


def test_disconnect_while_waiting_non_stream(server):
    before = cancelled(server, "stories")
    body = json.dumps({"model": "stories", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1900,
                       "ignore_eos": True}).encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.05)
    sock.close()
    deadline = time.time() + 10
    while time.time() < deadline and metric(server, "triad_requests_running", "stories") > 0:
        time.sleep(0.05)
    assert metric(server, "triad_requests_running", "stories") == 0
    assert metric(server, "triad_kv_cache_blocks_used", "stories") == 0
    deadline = time.time() + 10
    while time.time() < deadline and cancelled(server, "stories") < before + 1:
        time.sleep(0.05)
    assert cancelled(server, "stories") == before + 1


def test_64_parallel_streams(server):
    kw = dict(model="stories", messages=[{"role": "user", "content": "Once upon a time"}], max_tokens=24, temperature=0)
    want = client(server).chat.completions.create(**kw).choices[0].message.content

    def one(_):
        text, _, finish, usage, _ = collect_stream(
            client(server).chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
        return text, finish, usage.completion_tokens

    with cf.ThreadPoolExecutor(64) as ex:
        results = list(ex.map(one, range(64)))
    assert all(r == (want, "length", 24) for r in results)


# ---- authentication, shutdown


def test_api_key():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--api-key", "secret-123"])
    try:
        with pytest.raises(openai.AuthenticationError):
            client(s).models.list()
        with pytest.raises(openai.AuthenticationError):
            client(s, api_key="secret-124").models.list()
        r = httpx.post(s.base_url + "/chat/completions", json=GOOD)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert [m.id for m in client(s, api_key="secret-123").models.list().data] == ["stories"]
        assert httpx.get(s.base + "/health").status_code == 200  # public
    finally:
        assert s.stop() == 0


def test_sigterm_drains_in_flight_requests():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories"])
    result = {}

    def run():
        text, _, finish, usage, _ = collect_stream(client(s).chat.completions.create(
            model="stories", messages=[{"role": "user", "content": "Once"}], max_tokens=400, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
        result.update(finish=finish, n=usage.completion_tokens)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)
    rc = s.stop(signal.SIGTERM)
    t.join(60)
    assert rc == 0
    assert result == {"finish": "length", "n": 400}


def test_shutdown_timeout_cancels_with_a_visible_error():
    """Requests still running when --shutdown-timeout expires end with an error the SDK raises
    (an `error` event mid-stream, a 503 otherwise), never a stream that silently stops."""
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--max-seqs", "1", "--shutdown-timeout", "0.1"])
    outcomes = []
    lock = threading.Lock()

    def run(stream):
        try:
            kw = dict(model="stories", messages=[{"role": "user", "content": "Once"}], max_tokens=1500,
                      extra_body={"ignore_eos": True})
            if stream:
                text, _, finish, _, _ = collect_stream(client(s).chat.completions.create(stream=True, **kw))
            else:
                r = client(s).chat.completions.create(**kw)
                finish = r.choices[0].finish_reason
            out = ("done", finish)
        except openai.APIError as e:  # APIStatusError (503) or an error event in the stream
            out = ("error", str(e))
        with lock:
            outcomes.append(out)

    threads = [threading.Thread(target=run, args=(i % 2 == 0,)) for i in range(32)]
    for t in threads:
        t.start()
    # SIGTERM once every request is in the engine (a later one would find the listener closed).
    deadline = time.time() + 30
    while time.time() < deadline:
        inside = metric(s, "triad_requests_running", "stories") + metric(s, "triad_requests_waiting", "stories")
        with lock:
            if inside + len(outcomes) >= 32:
                break
        time.sleep(0.005)
    rc = s.stop(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert rc == 0, "".join(s.log[-60:])
    assert len(outcomes) == 32
    errors = [o for o in outcomes if o[0] == "error"]
    print("outcomes:", sum(o[0] == "done" for o in outcomes), "done,", len(errors), "errors")
    assert errors, outcomes
    assert all("shutting down" in msg for _, msg in errors), errors
    assert all(o == ("done", "length") for o in outcomes if o[0] == "done"), outcomes


# ---- the two client programs of the issue, on the default model


def test_client_program_a_streams(gemma_server):
    c = client(gemma_server)
    out = []
    stream = c.chat.completions.create(
        model="gemma",
        messages=[{"role": "system", "content": "You are a precise technical assistant."},
                  {"role": "user", "content": "Explain how paged attention reduces KV cache memory fragmentation."}],
        stream=True, max_tokens=64)
    for chunk in stream:
        out.append(chunk.choices[0].delta.content or "")
    text = "".join(out)
    assert text and "\ufffd" not in text


def test_utf8_deltas_are_whole_characters(gemma_server):
    c = client(gemma_server)
    for chunk in c.chat.completions.create(model="gemma", messages=[{"role": "user", "content": "Écris « bonjour » en chinois : 你好"}],
                                           max_tokens=40, temperature=0.8, seed=5, stream=True):
        for ch in chunk.choices:
            d = ch.delta.content or ""
            assert "\ufffd" not in d
            d.encode("utf-8")  # valid


def test_256_concurrent_streams_with_a_bounded_number_of_threads(server):
    import http.client

    n, gen = 256, 24
    barrier = threading.Barrier(n)
    results = [None] * n
    peak_threads = [0]
    stop = threading.Event()

    def threads_of_server():
        with open(f"/proc/{server.proc.pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        return 0

    def sampler():
        while not stop.is_set():
            peak_threads[0] = max(peak_threads[0], threads_of_server())
            time.sleep(0.01)

    def one(i):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        body = json.dumps({"model": "stories", "prompt": [1, 403 + i % 50, 407], "max_tokens": gen, "temperature": 0,
                           "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
        barrier.wait()  # every connection is open before any request is sent
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read().decode()
        conn.close()
        events = [line[6:] for line in data.split("\n") if line.startswith("data: ")]
        usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
        results[i] = (resp.status, events[-1], usage[0]["completion_tokens"] if usage else None)

    t = threading.Thread(target=sampler)
    t.start()
    with cf.ThreadPoolExecutor(n) as ex:
        list(ex.map(one, range(n)))
    stop.set()
    t.join()
    assert all(r == (200, "[DONE]", gen) for r in results), [r for r in results if r != (200, "[DONE]", gen)][:3]
    print(f"peak server threads with {n} streams: {peak_threads[0]}")
    assert peak_threads[0] <= 16, f"the server ran {peak_threads[0]} threads for {n} streams"


def test_overload_answers_503_with_retry_after():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--max-seqs", "1", "--max-queue", "2"])
    try:
        import urllib.request
        # Occupy the one sequence first: a long streamed request, read until its first token, so
        # the burst below surely finds it running (a burst alone overlapped too little under
        # ASan on a loaded VM, now and then).
        hold = urllib.request.urlopen(urllib.request.Request(
            s.base_url + "/completions", method="POST", headers={"Content-Type": "application/json"},
            data=json.dumps({"model": "stories", "prompt": [1, 403], "max_tokens": 1500, "ignore_eos": True,
                             "stream": True}).encode()), timeout=120)
        assert hold.status == 200 and hold.readline().startswith(b"data: ")
        body = json.dumps({"model": "stories", "prompt": [1, 403], "max_tokens": 4}).encode()

        def one(_):
            return http("POST", s.base_url + "/completions", body, {"Content-Type": "application/json"}, timeout=120)

        with cf.ThreadPoolExecutor(8) as ex:
            results = list(ex.map(one, range(8)))
        hold.close()
        statuses = sorted(r.status_code for r in results)
        assert 200 in statuses and 503 in statuses, statuses
        for r in results:
            if r.status_code == 503:
                assert r.json()["error"]["code"] == "server_is_overloaded"
                assert r.headers["retry-after"] == "1"
        assert httpx.get(s.base + "/health").status_code == 200
    finally:
        assert s.stop() == 0


def test_template_errors_are_400(tmp_path):
    need(STORIES)
    t = tmp_path / "strict.jinja"
    t.write_text("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
                 "{% endif %}{{ m.content }}{% endfor %}")
    s = Server(["-m", str(STORIES), "--alias", "stories", "--chat-template-file", str(t)])
    try:
        c = client(s)
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="stories", max_tokens=2,
                                      messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
        assert "System role not supported" in str(e.value)
        ok = c.chat.completions.create(model="stories", max_tokens=2, messages=[{"role": "user", "content": "y"}])
        assert ok.choices[0].finish_reason in ("length", "stop")
    finally:
        assert s.stop() == 0


def test_x_request_id_is_echoed(server):
    ok = httpx.post(server.base_url + "/chat/completions", json=GOOD, headers={"x-request-id": "bench-42"})
    assert ok.status_code == 200 and ok.headers.get("x-request-id") == "bench-42"
    err = httpx.post(server.base_url + "/chat/completions", json={**GOOD, "model": "nope"}, headers={"x-request-id": "r-2"})
    assert err.status_code == 404 and err.headers.get("x-request-id") == "r-2"
    plain = httpx.post(server.base_url + "/chat/completions", json=GOOD)
    assert "x-request-id" not in plain.headers


def test_first_chat_chunk_is_the_role_with_empty_content(server):
    stream = client(server).chat.completions.create(
        model="stories", messages=[{"role": "user", "content": "Once upon a time"}], max_tokens=6,
        temperature=0, stream=True)
    chunks = [c for c in stream if c.choices]
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content == ""
    assert all(c.choices[0].delta.role is None for c in chunks[1:])
    assert "".join(c.choices[0].delta.content or "" for c in chunks)  # the text follows


def test_default_model_serves_requests_without_one():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--default-model", "stories"])
    try:
        r = raw(s, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        assert r.status_code == 200, r.text
        assert r.json()["model"] == "stories"
        r = raw(s, "/v1/completions", {"prompt": "Once", "max_tokens": 3})
        assert r.status_code == 200 and r.json()["model"] == "stories", r.text
        # A name that is not served stays a 404, as in OpenAI.
        check_error(raw(s, "/v1/chat/completions", {**GOOD, "model": "gpt-4o"}), 404, "model_not_found", "model")
    finally:
        assert s.stop() == 0


def test_default_model_must_be_served():
    need(STORIES)
    p = subprocess.run([BIN, "serve", "--port", "0", "-m", str(STORIES), "--default-model", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "--default-model nope" in p.stderr


def test_cors_preflight_and_headers_on_every_response():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--api-key", "secret-123",
                "--cors-allow-origin", "http://app.example", "--cors-allow-origin", "http://other.example"])
    try:
        origin = {"Origin": "http://app.example"}
        # A browser's preflight: no credentials, answered before authentication.
        r = http("OPTIONS", s.base_url + "/chat/completions", None,
                 {**origin, "Access-Control-Request-Method": "POST",
                  "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"})
        assert r.status_code == 204, r.text
        assert r.headers["access-control-allow-origin"] == "http://app.example"
        assert "POST" in r.headers["access-control-allow-methods"]
        assert "x-stainless-os" in r.headers["access-control-allow-headers"]
        assert r.headers["vary"] == "Origin"
        # An origin that is not listed gets no CORS headers (the browser blocks it).
        r = http("OPTIONS", s.base_url + "/chat/completions", None,
                 {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        # The headers ride on answers, errors and streams.
        auth = {"Authorization": "Bearer secret-123"}
        r = raw(s, "/v1/chat/completions", GOOD, {**origin, **auth})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "http://app.example"
        r = raw(s, "/v1/chat/completions", GOOD, origin)
        assert r.status_code == 401 and r.headers["access-control-allow-origin"] == "http://app.example"
        r = raw(s, "/v1/chat/completions", {**GOOD, "stream": True}, {**origin, **auth})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["access-control-allow-origin"] == "http://app.example"
        assert "x-request-id" in r.headers["access-control-expose-headers"]
        r = http("GET", s.base_url + "/models", None, {"Origin": "http://evil.example", **auth})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    finally:
        assert s.stop() == 0


def test_cors_any_origin():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--cors-allow-origin", "*"])
    try:
        r = http("OPTIONS", s.base_url + "/models", None,
                 {"Origin": "http://anything.example", "Access-Control-Request-Method": "GET"})
        assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "*"
        assert "vary" not in r.headers
        r = http("GET", s.base_url + "/models", None, {"Origin": "http://anything.example"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    finally:
        assert s.stop() == 0


def test_no_cors_unless_asked(server):
    r = http("GET", server.base_url + "/models", None, {"Origin": "http://app.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers

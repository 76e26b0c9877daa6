"""Structured output through the official `openai` SDK: JSON mode (response_format json_object)
and GBNF grammars on both endpoints, streamed and not, with n > 1, stop strings and max_tokens;
bad grammars answered with 400 quickly while the server stays healthy."""
from __future__ import annotations

import concurrent.futures as cf
import json
import time

import openai
import pytest

import jsonschema

from conftest import GEMMA, need
from schema_corpus import CORPUS, HAND
from test_openai_sdk import client, collect_stream, httpx

JSON_MODE = {"type": "json_object"}


def is_json_prefix(text: str) -> bool:
    """Whether `text` can be completed to one JSON object (checked with json.loads on a set of
    completions, independent of our grammar): the open containers and string are found by a
    scan, then typical cut points (inside a string, key, number, literal, after ':' or ',')
    are closed."""
    stack, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
    closers = "".join("}" if b == "{" else "]" for b in reversed(stack))
    heads = ["", '"', 'n"', '0"', '00"', '000"', '0000"', "0", "1", "e", "ue", "rue", "alse", "lse", "se", "l",
             "ll", "ull", "null"]
    tails = ["", ":0", '"":0', "0", ' "":0']
    for h in heads:
        for t in tails:
            try:
                obj = json.loads(text + h + t + closers)
            except ValueError:
                continue
            if isinstance(obj, (dict, list)) and text.lstrip()[:1] in "{[":
                return True
    return False


def check_json_completion(text: str, finish: str, completion_tokens: int, max_tokens: int) -> bool:
    """A finished completion is exactly one JSON object; one cut by max_tokens is a prefix of
    one. Returns whether it finished."""
    if finish == "stop":
        obj = json.loads(text)  # leading / trailing whitespace is allowed by json.loads too
        assert isinstance(obj, dict), text
        return True
    assert finish == "length" and completion_tokens == max_tokens, (finish, completion_tokens, text)
    assert is_json_prefix(text), text
    return False


def test_prefix_checker_is_not_trivial():
    assert is_json_prefix('{"a": [1, 2.') and is_json_prefix('{"k') and is_json_prefix('{"a": tr')
    assert is_json_prefix('{"a": "x\\u00') and is_json_prefix('{"a": 1, ')
    assert is_json_prefix("[1") and not is_json_prefix('{"a": 01') and not is_json_prefix('{"a" 1')
    assert not is_json_prefix('{"a": 1,,') and not is_json_prefix("{'a'") and not is_json_prefix('"x')


@pytest.mark.parametrize("model", ["stories", "tiny"])
def test_json_mode_at_temperature_one_always_parses(server, model):
    """Sampled at temperature 1.0 from a real tiny model and from a random-weight one: every
    completion that ends is one JSON object, and every one cut by max_tokens is a prefix of one,
    whatever the model would have preferred."""
    c = client(server)
    finished = 0

    def one(seed):
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Reply in JSON."}],
                                      response_format=JSON_MODE, temperature=1.0, seed=seed, max_tokens=480)
        ch = r.choices[0]
        return check_json_completion(ch.message.content, ch.finish_reason, r.usage.completion_tokens, 480)

    with cf.ThreadPoolExecutor(8) as ex:
        finished = sum(ex.map(one, range(48)))
    print(f"{model}: {finished} of 48 completions ended within 480 tokens; the rest are valid prefixes")


def test_json_mode_streamed_equals_non_streamed_and_completions_endpoint(server):
    c = client(server)
    kw = dict(model="stories", messages=[{"role": "user", "content": "JSON please"}], response_format=JSON_MODE,
              temperature=1.0, seed=5, max_tokens=200)
    full = c.chat.completions.create(**kw)
    text, _, finish, usage, _ = collect_stream(
        c.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage.completion_tokens == full.usage.completion_tokens
    check_json_completion(text, finish, usage.completion_tokens, 200)
    r = c.completions.create(model="stories", prompt="Once upon a time", temperature=1.0, seed=9, max_tokens=200,
                             extra_body={"response_format": JSON_MODE})
    check_json_completion(r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens, 200)


def test_json_mode_with_n_and_stop(server):
    c = client(server)
    r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "JSON"}],
                                  response_format=JSON_MODE, temperature=1.0, seed=3, n=4, max_tokens=250)
    assert len(r.choices) == 4
    for ch in r.choices:
        assert ch.message.content.lstrip().startswith("{")
        if ch.finish_reason == "stop":
            assert isinstance(json.loads(ch.message.content), dict)
    # The JSON-mode grammar never produces a blank line, so the common stop string "\n\n" cannot
    # cut an object short.
    for seed in range(6):
        r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "JSON"}],
                                      response_format=JSON_MODE, stop=["\n\n"], temperature=1.0, seed=seed,
                                      max_tokens=300)
        assert "\n\n" not in r.choices[0].message.content
        check_json_completion(r.choices[0].message.content, r.choices[0].finish_reason,
                              r.usage.completion_tokens, 300)


def test_grammar_field_on_both_endpoints(server):
    c = client(server)
    g = 'root ::= ("yes" | "no") ", " [a-z]{2,6} "."'
    seen = set()
    for seed in range(8):
        r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "Answer."}],
                                      temperature=1.0, seed=seed, max_tokens=30, extra_body={"grammar": g})
        t = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop", t
        head, tail = t.split(", ")
        assert head in ("yes", "no") and tail.endswith(".") and 2 <= len(tail) - 1 <= 6 and tail[:-1].isalpha()
        seen.add(head)
        r = c.completions.create(model="tiny", prompt="Q:", temperature=1.0, seed=seed, max_tokens=30,
                                 extra_body={"grammar": g})
        t = r.choices[0].text
        assert r.choices[0].finish_reason == "stop" and t.split(", ")[0] in ("yes", "no"), t
    # max_tokens cuts a grammar short with finish_reason length
    r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}], max_tokens=3,
                                  extra_body={"grammar": 'root ::= "a"{20}'})
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content == "a" * len(r.choices[0].message.content)


HOSTILE = [
    ("grammar", "root ::= root \"x\" | \"y\"", "left-recursive"),
    ("grammar", "root ::= \"x\" root", "no finite string"),
    ("grammar", "root ::= undefined_rule", "never defined"),
    ("grammar", "root ::= [a-", "unterminated"),
    ("grammar", "root ::= \"x\"{1000000}", "limit"),
    ("grammar", "root ::= " + "(" * 100000 + "\"x\"" + ")" * 100000, "nested"),
    ("grammar", "root ::= " + " ".join(f"\"a\"{{0,9999}}" for _ in range(30)), "more than"),
    ("grammar", "\xff\xfe garbage", ""),
]


def test_hostile_grammars_get_400_quickly_while_streams_run(server):
    c = client(server)
    # Keep 8 streams producing tokens while the hostile grammars arrive.
    stop_flag = {"stop": False}

    def streamer(i):
        n = 0
        while not stop_flag["stop"]:
            for chunk in c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "Tell"}],
                                                    max_tokens=60, stream=True, seed=i,
                                                    extra_body={"ignore_eos": True}):
                if chunk.choices and chunk.choices[0].delta.content:
                    n += 1
        return n

    with cf.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(streamer, i) for i in range(8)]
        time.sleep(0.3)
        worst = 0.0
        for field, g, needle in HOSTILE:
            t0 = time.time()
            r = httpx.post(server.base_url + "/chat/completions",
                           json={"model": "stories", "messages": [{"role": "user", "content": "x"}], field: g})
            dt = time.time() - t0
            assert r.status_code == 400, (g[:60], r.text)
            err = r.json()["error"]
            assert err["param"] == "grammar" and err["code"] == "invalid_grammar", err
            assert needle in err["message"], err
            assert dt < 1.0, (g[:60], dt)  # typically a few ms; generous for the sanitizer build
            worst = max(worst, dt)
        print(f"slowest 400 for a hostile grammar: {worst * 1000:.1f} ms")
        stop_flag["stop"] = True
        counts = [f.result() for f in futs]
    assert all(n > 0 for n in counts)
    assert httpx.get(server.base + "/health").status_code == 200


def test_response_format_errors(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}],
                                  response_format={"type": "yaml"})
    assert e.value.param == "response_format"
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}],
                                  response_format=JSON_MODE, extra_body={"grammar": 'root ::= "x"'})
    assert e.value.param == "grammar"
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}],
                                  extra_body={"grammar": 42})
    assert e.value.param == "grammar"


def test_client_program_b_json_mode(gemma_server):
    """The issue's client program (b), unchanged but for base_url, api_key and model: JSON mode,
    a stop string, streamed. Each run that ends parses with json.loads; one cut by max_tokens
    is a valid prefix of an object."""
    c = client(gemma_server)
    for _ in range(4):
        out, finish = [], None
        stream = c.chat.completions.create(
            model="gemma",
            messages=[{"role": "system", "content": "You are a concise technical assistant."},
                      {"role": "user", "content": "Summarize the KV cache optimization techniques in 3 sentences."}],
            max_tokens=150, response_format={"type": "json_object"}, stop=["\n\n"], stream=True)
        for chunk in stream:
            out.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        text = "".join(out)
        assert "\n\n" not in text
        if finish == "stop":
            assert isinstance(json.loads(text), dict)
        else:
            assert finish == "length" and is_json_prefix(text), text


def format_checker():
    """jsonschema's format checks, with 'time' read as RFC 3339 full-time (HH:MM:SS and an
    offset), which JSON Schema 2020-12 means: without the optional rfc3339-validator package
    jsonschema falls back to draft 3's offset-less HH:MM:SS."""
    checker = jsonschema.FormatChecker()
    full_time = __import__("re").compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")

    @checker.checks("time")
    def _time(value):
        return not isinstance(value, str) or bool(full_time.match(value))

    return checker


def schema_format(schema, strict=True):
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": strict}}


def test_json_schema_corpus_always_validates(server):
    """At least 100 schemas (hand-written API and tool schemas plus generated ones) x a real tiny
    model and a random-weight one at temperature 1.0: every completion that ends parses and
    validates with jsonschema (formats checked); one cut by max_tokens is a valid JSON prefix."""
    assert len(CORPUS) >= 100
    c = client(server)
    checker = format_checker()
    finished = {"stories": 0, "tiny": 0}
    lock = __import__("threading").Lock()

    def one(args):
        i, schema, model = args
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Fill in the form."}],
                                      response_format=schema_format(schema), temperature=1.0, seed=i, max_tokens=256)
        ch = r.choices[0]
        text = ch.message.content
        if ch.finish_reason == "stop":
            jsonschema.validate(json.loads(text), schema, format_checker=checker)
            with lock:
                finished[model] += 1
        else:
            assert ch.finish_reason == "length" and r.usage.completion_tokens == 256, (ch.finish_reason, text)
            assert is_json_prefix(text), text

    jobs = [(i, s, m) for i, s in enumerate(CORPUS) for m in ("stories", "tiny")]
    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(one, jobs))
    print(f"json_schema corpus: {len(CORPUS)} schemas; ended and validated: {finished}")
    assert finished["stories"] + finished["tiny"] >= len(CORPUS) // 2


def test_json_schema_streams_and_keeps_declared_order(server):
    c = client(server)
    schema = {"type": "object", "properties": {"zeta": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "alpha": {"enum": ["x", "y"]}}, "required": ["zeta", "alpha"],
              "additionalProperties": False}
    kw = dict(model="tiny", messages=[{"role": "user", "content": "x"}], response_format=schema_format(schema),
              temperature=1.0, seed=4, max_tokens=64)
    full = c.chat.completions.create(**kw)
    text, _, finish, _, _ = collect_stream(c.chat.completions.create(stream=True, **kw))
    assert text == full.choices[0].message.content and finish == "stop"
    obj = json.loads(text)
    jsonschema.validate(obj, schema)
    assert list(obj) == ["zeta", "alpha"]  # the declared order, not the sorted one


def test_json_schema_errors(server):
    c = client(server)
    bad = [
        ({"type": "number", "multipleOf": 0.3}, True, "multipleOf"),
        ({"type": "string", "format": "hostname"}, True, "hostname"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}, False, "points to nothing"),
        ({"type": "string", "pattern": "(a)\\1"}, True, "backreferences"),
        ({"type": "integer", "minimum": 3, "maximum": 2}, False, "admit no value"),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 5, "maxItems": 2}, False, "below minItems"),
    ]
    for schema, strict, needle in bad:
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}],
                                      response_format=schema_format(schema, strict))
        assert e.value.param == "response_format" and e.value.code == "invalid_json_schema", e.value
        assert needle in str(e.value), str(e.value)
    # not strict: an unknown format is an annotation
    r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}], max_tokens=5,
                                  response_format=schema_format({"type": "string", "format": "hostname"}, False))
    assert r.choices[0].message.content.startswith('"')
    for rf in ({"type": "json_schema"}, {"type": "json_schema", "json_schema": {"name": "x"}},
               {"type": "json_schema", "json_schema": {"schema": 3}}):
        r = httpx.post(server.base_url + "/chat/completions",
                       json={"model": "stories", "messages": [{"role": "user", "content": "x"}], "response_format": rf})
        assert r.status_code == 400 and r.json()["error"]["param"] == "response_format", r.text


class Reading(__import__("pydantic").BaseModel):
    probability: float = __import__("pydantic").Field(ge=0, le=1)
    offset: float = __import__("pydantic").Field(gt=-1.5, lt=2.25)
    count: int = __import__("pydantic").Field(ge=0, le=40, multiple_of=4)


def test_decimal_bounds_with_pydantic_parse_and_tools(server):
    """Pydantic's Field(ge=0, le=1) on a float through chat.completions.parse (the SDK validates
    the parsed object), and a tool parameter {"type": "number", "minimum": 5, "maximum": 30}:
    every finished answer is within its bounds, enforced by the grammar."""
    c = client(server)
    parsed = 0
    for seed in range(12):
        r = c.chat.completions.parse(model="tiny", messages=[{"role": "user", "content": "A reading."}],
                                     response_format=Reading, temperature=1.0, seed=seed, max_tokens=200)
        ch = r.choices[0]
        if ch.finish_reason == "stop":
            v = ch.message.parsed
            assert 0 <= v.probability <= 1 and -1.5 < v.offset < 2.25 and v.count % 4 == 0, v
            parsed += 1
    assert parsed >= 3, parsed
    temp = {"type": "object", "properties": {"celsius": {"type": "number", "minimum": 5, "maximum": 30}},
            "required": ["celsius"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "set_temp", "parameters": temp}}]
    calls = 0
    for seed in range(12):
        r = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Warmer please"}], tools=tools,
                                      tool_choice="required", temperature=1.0, seed=seed, max_tokens=100)
        for tc in r.choices[0].message.tool_calls or []:
            args = json.loads(tc.function.arguments)
            jsonschema.validate(args, temp)
            assert 5 <= args["celsius"] <= 30
            calls += 1
    assert calls >= 3, calls


def test_non_strict_schemas_drop_what_cannot_be_enforced(server):
    """strict: false: a keyword the grammar cannot enforce is dropped and named in the
    x-triad-schema-dropped header; strict: true keeps it a 400 naming it."""
    schema = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.25},
                                               "y": {"not": {"type": "string"}}}, "required": ["x"]}
    body = {"model": "stories", "messages": [{"role": "user", "content": "x"}], "max_tokens": 20,
            "response_format": schema_format(schema, False)}
    r = httpx.post(server.base_url + "/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-triad-schema-dropped"] == "multipleOf, not"
    body["response_format"] = schema_format(schema, True)
    r = httpx.post(server.base_url + "/chat/completions", json=body)
    assert r.status_code == 400 and "multipleOf" in r.json()["error"]["message"], r.text
    # Tools: non-strict parameters are dropped and named; strict ones are a 400.
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    body = {"model": "stories", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "tools": [tool]}
    r = httpx.post(server.base_url + "/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["x-triad-schema-dropped"] == "multipleOf, not", r.text
    tool["function"]["strict"] = True
    r = httpx.post(server.base_url + "/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools", r.text
    # Streamed, the header is on the stream; and nothing dropped means no header.
    body = {"model": "stories", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "stream": True,
            "response_format": schema_format(schema, False)}
    r = httpx.post(server.base_url + "/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["x-triad-schema-dropped"] == "multipleOf, not"
    body["response_format"] = schema_format({"type": "object"}, False)
    assert "x-triad-schema-dropped" not in httpx.post(server.base_url + "/chat/completions", json=body).headers


def test_hostile_schemas_get_400_quickly(server):
    nested70 = {"type": "object"}
    for _ in range(70):
        nested70 = {"type": "array", "items": nested70}
    deep_body = ('{"model": "stories", "messages": [{"role": "user", "content": "x"}], "response_format": '
                 '{"type": "json_schema", "json_schema": {"name": "d", "schema": ' + '{"type": "array", "items": ' * 20000
                 + '{}' + '}' * 20000 + '}}}')
    t0 = time.time()
    r = httpx.post(server.base_url + "/chat/completions", content=deep_body)
    assert r.status_code == 400 and time.time() - t0 < 1.0, r.text[:300]
    # 5,000 deep in a tool's parameters and in a Responses text.format: refused at once too.
    deep5k = '{"type": "object", "properties": {"a": ' * 5000 + '{}' + '}}' * 5000
    for path, body in (("/chat/completions", '{"model": "stories", "messages": [{"role": "user", "content": "x"}], '
                        '"tools": [{"type": "function", "function": {"name": "f", "parameters": ' + deep5k + '}}]}'),
                       ("/responses", '{"model": "stories", "input": "x", "text": {"format": {"type": "json_schema", '
                        '"name": "d", "schema": ' + deep5k + '}}}')):
        t0 = time.time()
        r = httpx.post(server.base_url + path, content=body)
        assert r.status_code == 400 and time.time() - t0 < 1.0, r.text[:300]
    hostile = [
        nested70,
        {"type": "string", "pattern": "^(ab){0,99999}$"},
        {"type": "array", "items": {"type": "integer"}, "minItems": 90000},
        {"type": "string", "pattern": "[" * 500},
    ]
    for schema in hostile:
        t0 = time.time()
        r = httpx.post(server.base_url + "/chat/completions",
                       json={"model": "stories", "messages": [{"role": "user", "content": "x"}],
                             "response_format": schema_format(schema)})
        dt = time.time() - t0
        assert r.status_code == 400, r.text[:300]
        assert dt < 1.0, dt
    assert httpx.get(server.base + "/health").status_code == 200


def test_redos_patterns_run_as_automata(server):
    """Classic catastrophic-backtracking patterns compile to grammar rules and run as automata
    whose equal stacks merge: they answer at once and every finished output matches (checked
    with Python's re on the matching string only). Nested counted repetitions, whose distinct
    stacks multiply, are refused with a 400 quickly instead."""
    import re
    c = client(server)
    for pat in ["^(a+)+$", "^(a|a)*b$", "^(a|aa)+c$", "^([a-z]+)*[0-9]$"]:
        t0 = time.time()
        r = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], temperature=1.0,
                                      seed=1, max_tokens=40,
                                      response_format=schema_format({"type": "string", "pattern": pat}))
        assert time.time() - t0 < 10
        ch = r.choices[0]
        if ch.finish_reason == "stop":
            assert re.fullmatch(pat.strip("^$"), json.loads(ch.message.content)), ch.message.content
    t0 = time.time()
    r = httpx.post(server.base_url + "/chat/completions",
                   json={"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 40,
                         "response_format": schema_format({"type": "string", "pattern": "^((a{1,1000}){1,1000}){1,1000}$"})})
    assert time.time() - t0 < 5
    assert r.status_code == 200 or "ambiguous" in r.json()["error"]["message"], r.text


def test_flood_of_unique_schemas_stays_bounded(server):
    """200 distinct schemas one after another: each compiles (the per-model cache keeps the 64
    most recent), every answer is valid, and the server stays healthy."""
    c = client(server)
    t0 = time.time()
    for i in range(200):
        schema = {"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]}
        r = c.chat.completions.create(model="stories", messages=[{"role": "user", "content": "x"}], max_tokens=120,
                                      response_format=schema_format(schema))
        assert r.choices[0].finish_reason == "stop"
        assert json.loads(r.choices[0].message.content) == {f"k{i}": i}
    print(f"200 unique schemas in {time.time() - t0:.2f} s")
    assert httpx.get(server.base + "/health").status_code == 200

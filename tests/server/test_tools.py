"""Tool calling through the official `openai` SDK: tool_choice required / named / auto / none,
parallel calls, streamed delta.tool_calls that the SDK accumulates into the same calls as the
non-streamed answer, a tool result fed back, arguments always valid for the tool's schema, and
bad tool definitions answered with 400."""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from test_openai_sdk import client, httpx

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
           "required": ["city", "unit"], "additionalProperties": False}
ADD = {"type": "object", "properties": {"a": {"type": "integer", "minimum": -99, "maximum": 99},
                                        "b": {"type": "integer", "minimum": -99, "maximum": 99}}, "required": ["a", "b"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "description": "Add two integers", "parameters": ADD, "strict": True}},
]
SCHEMAS = {"get_weather": WEATHER, "add": ADD}
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_calls(calls):
    assert calls
    for tc in calls:
        assert tc.type == "function" and tc.id.startswith("call_")
        jsonschema.validate(json.loads(tc.function.arguments), SCHEMAS[tc.function.name])


def test_required_and_named_choice_force_valid_calls(server):
    c = client(server)
    checked = {"required": 0, "named": 0}
    for model in ("stories", "tiny"):
        for seed in range(6):
            r = c.chat.completions.create(model=model, messages=MSGS, tools=TOOLS, tool_choice="required",
                                          parallel_tool_calls=False, temperature=1.0, seed=seed, max_tokens=120)
            ch = r.choices[0]
            if ch.finish_reason == "length":  # cut inside its one call: no call to report
                continue
            assert ch.finish_reason == "tool_calls", ch
            assert len(ch.message.tool_calls) == 1
            check_calls(ch.message.tool_calls)
            checked["required"] += 1
            r = c.chat.completions.create(model=model, messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed,
                                          tool_choice={"type": "function", "function": {"name": "add"}}, max_tokens=120)
            ch = r.choices[0]
            if ch.finish_reason == "tool_calls":
                assert [t.function.name for t in ch.message.tool_calls] == ["add"]
                check_calls(ch.message.tool_calls)
                checked["named"] += 1
            else:
                assert ch.finish_reason == "length"
    assert checked["required"] > 0 and checked["named"] > 0, checked


def test_parallel_calls_and_streaming_match(server):
    c = client(server)
    parallel = 0
    for seed in range(20):
        kw = dict(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed,
                  max_tokens=200)
        full = c.chat.completions.create(**kw)
        ch = full.choices[0]
        if ch.finish_reason != "tool_calls":
            continue
        check_calls(ch.message.tool_calls)
        parallel += len(ch.message.tool_calls) > 1
        # The same seed streamed: fragments accumulate into the same calls.
        calls, content, finish = {}, "", None
        for chunk in c.chat.completions.create(stream=True, **kw):
            d = chunk.choices[0].delta
            content += d.content or ""
            for tc in d.tool_calls or []:
                e = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                e["id"] += tc.id or ""
                e["name"] += (tc.function.name or "") if tc.function else ""
                e["args"] += (tc.function.arguments or "") if tc.function else ""
            finish = chunk.choices[0].finish_reason or finish
        assert finish == "tool_calls" and content == ""
        assert [(calls[i]["name"], calls[i]["args"]) for i in sorted(calls)] == \
            [(t.function.name, t.function.arguments) for t in ch.message.tool_calls]
        assert all(calls[i]["id"].startswith("call_") for i in calls)
    assert parallel >= 1, "no seed produced parallel calls"


def test_streamed_arguments_arrive_in_fragments(server):
    """As OpenAI streams them: the call's id and name first, then its arguments in pieces while they
    are generated (not one piece at the end), and no empty content deltas meanwhile."""
    c = client(server)
    fragments = []
    for seed in range(8):
        kw = dict(model="tiny", messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed, max_tokens=200,
                  tool_choice={"type": "function", "function": {"name": "get_weather"}})
        full = c.chat.completions.create(**kw).choices[0]
        if full.finish_reason != "tool_calls":
            continue
        pieces, chunks = [], 0
        for chunk in c.chat.completions.create(stream=True, **kw):
            if not chunk.choices:
                continue
            chunks += 1
            d = chunk.choices[0].delta
            if chunks > 1:  # after the role chunk, a content delta always carries text
                assert d.content is None or d.content != "", chunk
            for tc in d.tool_calls or []:
                if tc.id:
                    assert tc.function.name == "get_weather" and tc.function.arguments == "" and not pieces
                else:
                    pieces.append(tc.function.arguments)
        assert "".join(pieces) == full.message.tool_calls[0].function.arguments
        jsonschema.validate(json.loads("".join(pieces)), WEATHER)
        fragments.append(len(pieces))
    assert fragments and min(fragments) > 3, fragments


def test_tool_choice_none_keeps_the_tools_in_the_prompt(server):
    c = client(server)
    kw = dict(model="stories", messages=MSGS, max_tokens=8, temperature=0)
    plain = c.chat.completions.create(**kw)
    auto = c.chat.completions.create(tools=TOOLS, **kw)
    none = c.chat.completions.create(tools=TOOLS, tool_choice="none", **kw)
    assert none.usage.prompt_tokens == auto.usage.prompt_tokens > plain.usage.prompt_tokens + 50
    assert none.choices[0].message.tool_calls is None
    assert none.usage.prompt_tokens_details.cached_tokens > 0  # the same prompt as the auto request


def test_legacy_functions(server):
    """The deprecated functions / function_call, as OpenAI still serves them."""
    c = client(server)
    fns = [t["function"] for t in TOOLS]
    kw = dict(model="tiny", messages=MSGS, functions=fns, function_call={"name": "add"}, temperature=1.0,
              max_tokens=150)
    seen = 0
    for seed in range(6):
        ch = c.chat.completions.create(seed=seed, **kw).choices[0]
        if ch.finish_reason == "length":
            continue
        assert ch.finish_reason == "function_call" and ch.message.tool_calls is None
        assert ch.message.function_call.name == "add"
        args = ch.message.function_call.arguments
        jsonschema.validate(json.loads(args), ADD)
        name, streamed, finish = "", "", None
        for chunk in c.chat.completions.create(stream=True, seed=seed, **kw):
            if not chunk.choices:
                continue
            fc = chunk.choices[0].delta.function_call
            if fc:
                name += fc.name or ""
                streamed += fc.arguments or ""
            finish = chunk.choices[0].finish_reason or finish
        assert (name, streamed, finish) == ("add", args, "function_call")
        seen += 1
        # The call and its result fed back in the legacy shape.
        history = MSGS + [{"role": "assistant", "content": None, "function_call": {"name": "add", "arguments": args}},
                          {"role": "function", "name": "add", "content": "3"}]
        r = c.chat.completions.create(model="tiny", messages=history, functions=fns, function_call="none", max_tokens=10)
        assert r.choices[0].message.function_call is None and r.choices[0].finish_reason in ("stop", "length")
    assert seen > 0
    body = {"model": "tiny", "messages": MSGS, "functions": fns, "tools": TOOLS}
    r = httpx.post(server.base_url + "/chat/completions", json=body, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "functions"
    r = httpx.post(server.base_url + "/chat/completions", json={"model": "tiny", "messages": MSGS,
                                                               "function_call": "auto"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "function_call"
    r = httpx.post(server.base_url + "/chat/completions", json={"model": "tiny", "messages": MSGS, "functions": fns,
                                                               "function_call": {"name": "nope"}}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "function_call"


def test_auto_none_and_tool_result_round_trip(server):
    c = client(server)
    # auto: whatever the model writes, any call it makes is valid; text stays content.
    for seed in range(4):
        r = c.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed, max_tokens=60)
        ch = r.choices[0]
        if ch.message.tool_calls:
            check_calls(ch.message.tool_calls)
        else:
            assert "<tool_call>" not in (ch.message.content or "") or ch.finish_reason == "length"
    # none: plain text, no calls
    r = c.chat.completions.create(model="stories", messages=MSGS, tools=TOOLS, tool_choice="none", max_tokens=20)
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason in ("stop", "length")
    # A call and its result fed back, as an agent loop does.
    r = c.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="required",
                                  parallel_tool_calls=False, temperature=1.0, seed=1, max_tokens=120)
    m = r.choices[0].message
    assert m.tool_calls
    history = MSGS + [m.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "18 C and sunny"}]
    r2 = c.chat.completions.create(model="stories", messages=history, tools=TOOLS, tool_choice="none", max_tokens=20)
    assert r2.choices[0].message.content
    r3 = c.chat.completions.create(model="stories", messages=history, tools=TOOLS, tool_choice="required",
                                   parallel_tool_calls=False, temperature=1.0, seed=2, max_tokens=150)
    if r3.choices[0].finish_reason == "tool_calls":
        check_calls(r3.choices[0].message.tool_calls)


def test_bad_tools_get_400(server):
    base = {"model": "stories", "messages": MSGS}
    cases = [
        ({"tools": "x"}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
        ({"tools": [TOOLS[0], TOOLS[0]]}, "tools[1].function.name"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object", "properties": {
            "n": {"type": "number", "multipleOf": 0.3}}}}}]}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]}, "tools[0].function.parameters"),
        ({"messages": MSGS + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                                       "function": {"name": "f", "arguments": "{not json"}}]}]},
         "messages[1].tool_calls"),
    ]
    for extra, param in cases:
        r = httpx.post(server.base_url + "/chat/completions", json={**base, **extra})
        assert r.status_code == 400, (extra, r.text)
        assert r.json()["error"]["param"] == param, (extra, r.text)
    assert httpx.get(server.base + "/health").status_code == 200

"""Tool calls in each model family's own syntax (server/tool_formats.h), end to end through the
openai SDK: the server reads the syntax from the chat template, the grammar holds the model to it,
and the answer comes back as OpenAI tool_calls, the same streamed and whole.

stories260K stands in for each family's model, served with that family's published chat template
(tests' testdata templates): under tool_choice "required" its sampled text is whatever the grammar
lets through, so every call it makes is in the family's syntax (spelt with byte tokens), and the
parser must read each one back. The gpt-oss template also splits harmony channels: an analysis
message comes back as reasoning_content. The syntaxes themselves, piece boundaries and malformed
calls are tested in tests/unit/tool_calls_test.cpp."""
import json

import jsonschema
import openai
import pytest

from conftest import STORIES, TESTDATA, Server, need
from test_openai_sdk import httpx
from test_tools import SCHEMAS, TOOLS, check_calls

FAMILIES = {
    "deepseek-v3.1": ("deepseek-ai-DeepSeek-V3.1.jinja", "get_weather<｜tool"),
    "deepseek-r1": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "```json"),
    "kimi-k2": ("moonshotai-Kimi-K2.jinja", "<|tool_call_argument_begin|>"),
    "glm-4.5": ("GLM-4.6.jinja", "<arg_key>"),
    "qwen3-coder": ("Qwen3-Coder.jinja", "<parameter="),
    "harmony": ("openai-gpt-oss-120b.jinja", "to=functions."),
}
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    need(STORIES)
    template = TESTDATA / "templates" / FAMILIES[request.param][0]
    need(template)
    s = Server(["-m", str(STORIES), "--alias", "m", "--chat-template-file", str(template)])
    assert any(f"tool calls in the {request.param} format" in line for line in s.log), "".join(s.log[-10:])
    yield request.param, s
    assert s.stop() == 0, "".join(s.log[-20:])


def client(s):
    return openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0)


def streamed(c, **kw):
    calls, content, reasoning, finish = {}, "", "", None
    for chunk in c.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        reasoning += getattr(d, "reasoning_content", None) or ""
        for tc in d.tool_calls or []:
            e = calls.setdefault(tc.index, {"name": "", "args": ""})
            e["name"] += (tc.function.name or "") if tc.function else ""
            e["args"] += (tc.function.arguments or "") if tc.function else ""
        finish = chunk.choices[0].finish_reason or finish
    return [(e["name"], e["args"]) for _, e in sorted(calls.items())], content, reasoning, finish


def test_forced_calls_come_back_as_tool_calls_whole_and_streamed(family):
    name, s = family
    c = client(s)
    made = 0
    for seed in range(10):
        kw = dict(model="m", messages=MSGS, tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed,
                  max_tokens=320, parallel_tool_calls=seed % 2 == 0)
        r = c.chat.completions.create(**kw)
        ch = r.choices[0]
        if ch.finish_reason == "length":  # cut inside its call (or, for gpt-oss, its analysis)
            continue
        assert ch.finish_reason == "tool_calls", (name, ch)
        check_calls(ch.message.tool_calls)
        made += 1
        calls, content, reasoning, finish = streamed(c, **kw)
        assert finish == "tool_calls"
        assert calls == [(t.function.name, t.function.arguments) for t in ch.message.tool_calls]
        assert content == (ch.message.content or "")
        assert reasoning == (getattr(ch.message, "reasoning_content", None) or "")
        if name == "harmony" and reasoning:
            assert r.usage.completion_tokens_details.reasoning_tokens > 0
    assert made >= 2, name


def test_named_tool_and_single_call(family):
    name, s = family
    c = client(s)
    made = 0
    for seed in range(4):
        r = c.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed, max_tokens=200,
                                      tool_choice={"type": "function", "function": {"name": "add"}})
        ch = r.choices[0]
        if ch.finish_reason == "tool_calls":
            assert [t.function.name for t in ch.message.tool_calls] == ["add"]
            jsonschema.validate(json.loads(ch.message.tool_calls[0].function.arguments), SCHEMAS["add"])
            made += 1
        else:
            assert ch.finish_reason == "length"
    assert made > 0, name  # at least one named call completed (not only cut-off ones)


def test_the_template_renders_tools_and_history_in_its_syntax(family):
    """The conversation with a call and its result renders (vLLM's /tokenize with messages), and
    the assistant's earlier call is written in the family's own syntax."""
    name, s = family
    history = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "c"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
    ]
    r = httpx.post(s.base + "/tokenize", json={"model": "m", "messages": history, "tools": TOOLS})
    assert r.status_code == 200, r.text
    text = httpx.post(s.base + "/detokenize", json={"model": "m", "tokens": r.json()["tokens"]}).json()["prompt"]
    assert FAMILIES[name][1] in text, text[-400:]
    assert "18 C, sunny" in text
    # And the model answers after the tool result (auto: text or another call, both well-formed).
    r = client(s).chat.completions.create(model="m", messages=history, tools=TOOLS, temperature=0, max_tokens=40)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    if r.choices[0].message.tool_calls:
        check_calls(r.choices[0].message.tool_calls)


def test_harmony_analysis_is_reasoning(family):
    name, s = family
    if name != "harmony":
        pytest.skip("gpt-oss only")
    # The story model does not choose to think, so a grammar makes it write harmony messages: an
    # analysis, then the final answer. The analysis comes back as reasoning_content (streamed as
    # delta.reasoning_content) and is counted; no channel marker reaches content.
    grammar = ('root ::= "<|channel|>analysis<|message|>" [a-z ]{8,40} "<|end|><|start|>assistant<|channel|>final'
               '<|message|>" [a-z ]{4,20}')
    kw = dict(model="m", messages=MSGS, temperature=1.0, seed=3, max_tokens=150, extra_body={"grammar": grammar})
    r = client(s).chat.completions.create(**kw)
    m = r.choices[0].message
    assert r.choices[0].finish_reason == "stop", r
    assert 8 <= len(m.reasoning_content) <= 40 and set(m.reasoning_content) <= set("abcdefghijklmnopqrstuvwxyz ")
    assert 4 <= len(m.content) <= 20 and "<|" not in m.content
    assert 0 < r.usage.completion_tokens_details.reasoning_tokens < r.usage.completion_tokens
    calls, content, reasoning, finish = streamed(client(s), **kw)
    assert (content, reasoning, finish, calls) == (m.content, m.reasoning_content, "stop", [])
    # Under auto, whatever the model writes, no analysis or channel marker leaks into content.
    for seed in range(6):
        r = client(s).chat.completions.create(model="m", messages=MSGS, tools=TOOLS, temperature=1.0, seed=seed,
                                              max_tokens=120)
        c = r.choices[0].message.content or ""
        assert "<|channel|>" not in c and "<|message|>" not in c


def test_harmony_calls_are_read_with_reasoning_format_none():
    """--reasoning-format none keeps gpt-oss's analysis in the content, but its calls are still
    calls: harmony is how the model writes them."""
    need(STORIES)
    template = TESTDATA / "templates" / FAMILIES["harmony"][0]
    need(template)
    s = Server(["-m", str(STORIES), "--alias", "m", "--chat-template-file", str(template), "--reasoning-format", "none"])
    try:
        made = 0
        for seed in range(4):
            r = client(s).chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="required",
                                                  parallel_tool_calls=False, temperature=1.0, seed=seed, max_tokens=200)
            ch = r.choices[0]
            if ch.finish_reason == "length":
                continue
            assert ch.finish_reason == "tool_calls", ch
            check_calls(ch.message.tool_calls)
            assert "<|" not in (ch.message.content or "")
            made += 1
        assert made > 0
    finally:
        assert s.stop() == 0, "".join(s.log[-20:])

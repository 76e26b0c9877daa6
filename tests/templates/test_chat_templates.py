"""Our template engine (`triad template render`) against Python's jinja2 (reference_render.py)
on the 44 real chat templates of ../shared/testdata/templates and the built-in tests below,
for several conversations each: system / user / assistant turns, tools with a tool call and
its result, multi-turn, with and without the generation prompt. Where jinja2 raises (a template
rejecting a conversation on purpose), our engine must fail too, with an error and no output."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import reference_render

TESTDATA = Path(os.environ.get("TRIAD_TESTDATA", Path(__file__).resolve().parents[3] / "shared" / "testdata"))
TEMPLATES = TESTDATA / "templates"
BIN = os.environ.get("TRIAD_BIN")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

CONVERSATIONS = {
    "system_user": {
        "messages": [
            {"role": "system", "content": "You are a precise technical assistant."},
            {"role": "user", "content": "Explain how paged attention reduces KV cache fragmentation."},
        ],
        "add_generation_prompt": True,
    },
    "user_only_no_prompt": {
        "messages": [{"role": "user", "content": "Hello! Ça va? 你好 🙂"}],
        "add_generation_prompt": False,
    },
    "multi_turn": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And times 3?\nShow the steps."},
        ],
        "add_generation_prompt": True,
    },
    "tools": {
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
            {"role": "user", "content": "Thanks. And in Rome?"},
        ],
        "tools": [WEATHER_TOOL],
        "add_generation_prompt": True,
    },
    "tools_no_calls": {
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [WEATHER_TOOL],
        "add_generation_prompt": True,
    },
}

BASE_CONTEXT = {"bos_token": "<s>", "eos_token": "</s>"}


OWN_TEMPLATES = Path(__file__).resolve().parent / "data"


def cases():
    out = []
    if not TEMPLATES.is_dir():
        out.append(pytest.param(None, None, marks=pytest.mark.skip(reason=f"chat templates missing at {TEMPLATES}")))
    paths = sorted(TEMPLATES.glob("*.jinja")) if TEMPLATES.is_dir() else []
    for path in paths + sorted(OWN_TEMPLATES.glob("*.jinja")):
        for conv in CONVERSATIONS:
            out.append(pytest.param(path, conv, id=f"{path.stem}-{conv}"))
    return out


def render_ours(template: Path, context: dict):
    p = subprocess.run([BIN, "template", "render", "-t", str(template)], input=json.dumps(context).encode(),
                       capture_output=True, timeout=30)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("template,conv", cases())
def test_matches_jinja2(template, conv):
    if not BIN:
        pytest.skip("TRIAD_BIN is not set")
    context = dict(BASE_CONTEXT, **CONVERSATIONS[conv])
    source = template.read_text(encoding="utf-8")
    try:
        want = reference_render.render(source, json.loads(json.dumps(context)))
        want_error = None
    except Exception as e:  # noqa: BLE001 - the reference's own exception is the expectation
        want, want_error = None, e
    rc, got, err = render_ours(template, context)
    assert "internal error" not in err, err
    if want_error is not None:
        assert rc == 1 and got == "", f"jinja2 raised {type(want_error).__name__}: {want_error}; we printed {got[:300]!r}"
        return
    assert rc == 0, f"we failed: {err}"
    assert got == want

"""Reasoning output of thinking models (server/reasoning.h) through the openai SDK: the <think>
part of a chat answer comes back as message.reasoning_content (delta.reasoning_content when
streaming), apart from content, and usage.completion_tokens_details.reasoning_tokens counts it.

stories260K stands in for a thinking model with two chat templates: one whose generation prompt
ends with "<think>\\n" (as DeepSeek-R1's does: the answer starts inside the reasoning, and a
story never writes "</think>", so all of it is reasoning), and one that mentions <think> but does
not open it (the model's text does not start with the tag, so all of it is content). The split
of text at "</think>" and every piece boundary is tested in tests/unit/reasoning_test.cpp."""
import openai
import pytest

from conftest import STORIES, Server, need

OPENS = "{% for m in messages %}{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<think>\n{% endif %}"
MENTIONS = "{# a thinking model writes <think> first #}{% for m in messages %}{{ m.content }}\n{% endfor %}"
ASK = dict(model="m", messages=[{"role": "user", "content": "Once upon a time"}], max_tokens=24, temperature=0)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    need(STORIES)
    d = tmp_path_factory.mktemp("think")
    (d / "opens.jinja").write_text(OPENS)
    (d / "mentions.jinja").write_text(MENTIONS)
    out = {
        "opens": Server(["-m", str(STORIES), "--alias", "m", "--chat-template-file", str(d / "opens.jinja")]),
        "none": Server(["-m", str(STORIES), "--alias", "m", "--chat-template-file", str(d / "opens.jinja"),
                        "--reasoning-format", "none"]),
        "mentions": Server(["-m", str(STORIES), "--alias", "m", "--chat-template-file", str(d / "mentions.jinja")]),
    }
    yield out
    for s in out.values():
        assert s.stop() == 0, "".join(s.log[-20:])


def client(s):
    return openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0)


def test_reasoning_is_returned_apart_and_counted(servers):
    r = client(servers["opens"]).chat.completions.create(**ASK)
    plain = client(servers["none"]).chat.completions.create(**ASK)
    msg = r.choices[0].message
    assert msg.reasoning_content == plain.choices[0].message.content and msg.reasoning_content
    assert msg.content == ""
    assert r.usage.completion_tokens == 24
    assert r.usage.completion_tokens_details.reasoning_tokens == 24
    assert getattr(plain.choices[0].message, "reasoning_content", None) is None
    assert plain.usage.completion_tokens_details.reasoning_tokens == 0


def test_streamed_reasoning_deltas_add_up(servers):
    whole = client(servers["opens"]).chat.completions.create(**ASK).choices[0].message.reasoning_content
    chunks = list(client(servers["opens"]).chat.completions.create(**ASK, stream=True,
                                                                   stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant" and deltas[0].content == ""
    assert sum(1 for d in deltas if d.role) == 1
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == whole
    assert all(not d.content for d in deltas)
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 24


def test_a_template_that_does_not_open_thinking_leaves_text_as_content(servers):
    r = client(servers["mentions"]).chat.completions.create(**ASK)
    assert r.choices[0].message.content and not r.choices[0].message.content.lstrip().startswith("<think>")
    assert getattr(r.choices[0].message, "reasoning_content", None) is None
    assert r.usage.completion_tokens_details.reasoning_tokens == 0


def test_responses_api_returns_a_reasoning_item(servers):
    """/v1/responses: the reasoning is an output item of type "reasoning" before the message (its
    text as reasoning_text content), streamed as response.reasoning_text.delta events, and
    usage.output_tokens_details.reasoning_tokens counts it."""
    c = client(servers["opens"])
    whole = c.chat.completions.create(**ASK).choices[0].message.reasoning_content
    kw = dict(model="m", input="Once upon a time", max_output_tokens=24, temperature=0)
    r = c.responses.create(**kw)
    assert [o.type for o in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].type == "reasoning_text" and r.output[0].content[0].text == whole
    assert r.output[0].summary == []
    assert r.output_text == ""
    assert r.usage.output_tokens_details.reasoning_tokens == 24
    events = list(c.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    assert types[0] == "response.created"
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == whole
    done = [e for e in events if e.type == "response.reasoning_text.done"]
    assert len(done) == 1 and done[0].text == whole and done[0].output_index == 0
    final = events[-1].response
    assert [o.type for o in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == whole
    assert events[-1].type == "response.incomplete"  # cut by max_output_tokens inside the reasoning
    # Without a thinking template there is no reasoning item.
    plain = client(servers["mentions"]).responses.create(**kw)
    assert [o.type for o in plain.output] == ["message"]
    assert plain.usage.output_tokens_details.reasoning_tokens == 0

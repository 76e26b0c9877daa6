"""The Responses API through the official `openai` SDK: responses.create (plain, streamed, with
function tools and their round trip, text.format json_schema), responses.stream and
responses.parse, previous_response_id over the stored responses, GET / DELETE / input_items, and
bad requests answered with 400 / 404 in OpenAI's error shape."""
from __future__ import annotations

import json

import jsonschema
import openai
import pydantic
import pytest

from test_openai_sdk import client, http, httpx

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather in a city", "parameters": WEATHER}]
STOP = {"stop": ["."]}  # stories260K rarely ends on its own: a stop string lets a response complete


def events_of(stream):
    evs = list(stream)
    assert [e.sequence_number for e in evs] == list(range(len(evs)))
    assert evs[0].type == "response.created" and evs[1].type == "response.in_progress"
    assert evs[0].response.status == "in_progress" and evs[0].response.output == []
    return evs


def test_plain_and_streamed_text(server):
    c = client(server)
    r = c.responses.create(model="stories", input="Once upon a time", max_output_tokens=12, temperature=0)
    assert r.id.startswith("resp_") and r.object == "response" and r.model == "stories"
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    msg = r.output[0]
    assert msg.type == "message" and msg.id.startswith("msg_") and msg.role == "assistant" and msg.status == "incomplete"
    assert r.output_text == msg.content[0].text and r.output_text
    assert r.usage.output_tokens == 12 and r.usage.input_tokens > 3
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens >= 0 and r.usage.output_tokens_details.reasoning_tokens == 0
    raw = httpx.post(server.base_url + "/responses", json={"model": "stories", "input": "Once upon a time",
                                                           "max_output_tokens": 12, "temperature": 0}).json()
    assert raw["output_text"] == r.output_text  # plain HTTP clients get it too; greedy is reproducible

    # Streamed, the same greedy answer arrives as deltas in the documented order.
    evs = events_of(c.responses.create(model="stories", input="Once upon a time", max_output_tokens=12, temperature=0,
                                       stream=True))
    types = [e.type for e in evs]
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert evs[2].item.content == [] and evs[3].part.text == ""
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    deltas = "".join(e.delta for e in evs if e.type == "response.output_text.delta")
    assert deltas == r.output_text == evs[-4].text
    final = evs[-1].response
    assert final.output_text == r.output_text and final.usage.output_tokens == 12

    # A response that stops completes, and the SDK's stream helper returns it.
    with c.responses.stream(model="stories", input="Lily went", extra_body=STOP, temperature=0) as s:
        for _ in s:
            pass
        done = s.get_final_response()
    assert done.status == "completed" and done.incomplete_details is None
    plain = c.responses.create(model="stories", input="Lily went", extra_body=STOP, temperature=0)
    assert plain.status == "completed" and plain.output_text == done.output_text


def test_instructions_and_message_items(server):
    c = client(server)
    a = c.responses.create(model="stories", input="Tom ran", max_output_tokens=2)
    b = c.responses.create(model="stories", input="Tom ran", instructions="Tell a short story.", max_output_tokens=2)
    assert b.usage.input_tokens > a.usage.input_tokens and b.instructions == "Tell a short story."
    # Messages in both forms (easy and typed, content as a string or parts, earlier output replayed).
    items = [{"role": "developer", "content": "Be brief."},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
             a.output[0].model_dump(exclude_none=True),
             {"role": "user", "content": "Again"}]
    r = c.responses.create(model="stories", input=items, max_output_tokens=3, temperature=0.5,
                           top_p=0.9, reasoning={"effort": "low"}, metadata={"k": "v"}, store=False)
    assert r.output_text and r.metadata == {"k": "v"} and r.temperature == 0.5 and r.top_p == 0.9
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)  # store: false


def test_previous_response_id_and_the_store(server):
    c = client(server)
    r1 = c.responses.create(model="stories", input="Once upon a time", instructions="Story time.", max_output_tokens=8)
    r2 = c.responses.create(model="stories", input="Then", previous_response_id=r1.id, max_output_tokens=8)
    assert r2.previous_response_id == r1.id and r2.instructions is None  # instructions are not inherited
    # The second prompt holds the first turn (input and output), most of it from the prefix cache.
    assert r2.usage.input_tokens > r1.usage.output_tokens + 3
    got = c.responses.retrieve(r2.id)
    assert got.id == r2.id and got.output_text == r2.output_text and got.usage == r2.usage
    items = c.responses.input_items.list(r2.id, order="asc").data
    assert [i.type for i in items] == ["message", "message", "message"]
    assert items[0].content[0].text == "Once upon a time" and items[2].content[0].text == "Then"
    assert items[1].id == r1.output[0].id
    newest = c.responses.input_items.list(r2.id, limit=1)
    assert [i.id for i in newest.data] == [items[2].id] and newest.has_more
    page2 = c.responses.input_items.list(r2.id, limit=1, after=items[2].id)
    assert [i.id for i in page2.data] == [items[1].id]
    c.responses.delete(r1.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r1.id)
    with pytest.raises(openai.NotFoundError) as e:
        c.responses.create(model="stories", input="x", previous_response_id=r1.id)
    assert e.value.body["param"] == "previous_response_id"
    assert http("DELETE", server.base_url + "/responses/resp_nope").status_code == 404


def check_call(item):
    assert item.type == "function_call" and item.id.startswith("fc_") and item.call_id.startswith("call_")
    assert item.name == "get_weather" and item.status == "completed"
    jsonschema.validate(json.loads(item.arguments), WEATHER)


def test_function_tools_streamed_and_round_trip(server):
    c = client(server)
    seen = 0
    for seed in range(8):
        kw = dict(model="tiny", input="What is the weather in Paris?", tools=TOOLS, tool_choice="required",
                  parallel_tool_calls=False, temperature=1.0, max_output_tokens=200, extra_body={"seed": seed})
        r = c.responses.create(**kw)
        if r.status != "completed":
            continue
        calls = [o for o in r.output if o.type == "function_call"]
        assert len(calls) == 1 and r.output_text == ""
        check_call(calls[0])
        # Streamed: the item is announced with empty arguments, which then arrive in fragments.
        evs = events_of(c.responses.create(stream=True, **kw))
        types = [e.type for e in evs]
        added = next(e for e in evs if e.type == "response.output_item.added")
        assert added.item.type == "function_call" and added.item.arguments == "" and added.item.status == "in_progress"
        frags = [e.delta for e in evs if e.type == "response.function_call_arguments.delta"]
        assert len(frags) > 3 and all(e.item_id == added.item.id for e in evs if "arguments" in e.type)
        done = next(e for e in evs if e.type == "response.function_call_arguments.done")
        assert "".join(frags) == done.arguments == calls[0].arguments and done.name == "get_weather"
        assert types[-2:] == ["response.output_item.done", "response.completed"]
        assert "response.content_part.added" not in types
        final = evs[-1].response.output
        assert [o.type for o in final] == ["function_call"] and final[0].arguments == calls[0].arguments
        check_call(final[0])
        # The round trip: the call and its output sent back, as the Agents SDK does.
        follow = [{"role": "user", "content": "What is the weather in Paris?"}, calls[0].model_dump(exclude_none=True),
                  {"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C and sunny"}]
        r2 = c.responses.create(model="tiny", input=follow, tools=TOOLS, tool_choice="none", max_output_tokens=5)
        assert r2.output[0].type == "message" and r2.usage.input_tokens > r.usage.input_tokens
        r3 = c.responses.create(model="tiny", previous_response_id=r.id, tools=TOOLS, tool_choice="none", max_output_tokens=5,
                                input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C"}])
        assert r3.output[0].type == "message"
        seen += 1
    assert seen > 0


def test_a_call_cut_off_is_closed_and_the_conversation_continues(server):
    """A stop string inside a call's arguments ends it: its item is closed (incomplete) in the
    stream and the final response, and continuing from that response still works."""
    c = client(server)
    kw = dict(model="tiny", input="What is the weather in Paris?", tools=TOOLS, tool_choice="required",
              max_output_tokens=200, extra_body={"seed": 1, "stop": ["city"]})
    evs = events_of(c.responses.create(stream=True, **kw))
    types = [e.type for e in evs]
    assert "response.function_call_arguments.done" in types, types
    done = [e for e in evs if e.type == "response.output_item.done"]
    assert done and done[-1].item.type == "function_call" and done[-1].item.status == "incomplete"
    final = evs[-1].response
    assert evs[-1].type == "response.completed" and final.output[-1].status == "incomplete"
    r2 = c.responses.create(model="tiny", previous_response_id=final.id, input="Never mind.", max_output_tokens=3)
    assert r2.status in ("completed", "incomplete")
    # The cut-off item sent back by a client is accepted too.
    r3 = c.responses.create(model="tiny", max_output_tokens=3,
                            input=[{"role": "user", "content": "Hi"}, final.output[-1].model_dump(exclude_none=True)])
    assert r3.output


class Weather(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=10)
    celsius: int


def test_text_format_json_schema_and_parse(server):
    c = client(server)
    r = c.responses.parse(model="tiny", input="Weather as JSON", text_format=Weather, max_output_tokens=200,
                          temperature=1.0, extra_body={"seed": 3})
    assert r.status == "completed" and isinstance(r.output_parsed, Weather)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
    r = c.responses.create(model="tiny", input="a number", max_output_tokens=100, extra_body={"seed": 1},
                           text={"format": {"type": "json_schema", "name": "n", "schema": schema, "strict": True}})
    assert r.status == "completed" and r.text.format.type == "json_schema"
    jsonschema.validate(json.loads(r.output_text), schema)
    r = c.responses.create(model="tiny", input="json", max_output_tokens=60, text={"format": {"type": "json_object"}})
    assert r.output_text.lstrip().startswith("{")
    if r.status == "completed":
        assert isinstance(json.loads(r.output_text), dict)


@pytest.mark.parametrize("body,param", [
    ({"model": "stories"}, "input"),
    ({"model": "stories", "input": 3}, "input"),
    ({"model": "stories", "input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
    ({"model": "stories", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]},
     "input[0].content[0]"),
    ({"model": "stories", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]},
     "input[0].arguments"),
    ({"model": "stories", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"model": "stories", "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"model": "stories", "input": "x", "background": True}, "background"),
    ({"model": "stories", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": "stories", "input": "x", "text": {"format": {"type": "yaml"}}}, "text.format"),
    ({"model": "stories", "input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object", "properties": {"a": {"type": "string", "format": "ipv9"}}}, "strict": True}}}, "text.format"),
])
def test_bad_requests(server, body, param):
    r = httpx.post(server.base_url + "/responses", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param, err
    assert httpx.post(server.base_url + "/responses", json={"model": "nope", "input": "x"}).status_code == 404

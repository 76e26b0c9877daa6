"""A corpus of JSON Schemas for structured-output tests: realistic API and tool schemas written
by hand, plus generated ones (seeded) that combine every supported keyword."""
from __future__ import annotations

import random

HAND = [
    {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
     "required": ["location", "unit"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 130},
                                      "email": {"type": "string", "format": "email"}}, "required": ["name", "age"]},
    {"type": "object", "properties": {"order_id": {"type": "string", "format": "uuid"}, "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                                      "express": {"type": "boolean"}}, "required": ["order_id", "quantity", "express"], "additionalProperties": False},
    {"type": "object", "properties": {"street": {"type": "string", "maxLength": 30}, "city": {"type": "string", "maxLength": 20},
                                      "zip": {"type": "string", "pattern": "^[0-9]{5}$"}, "country": {"const": "US"}},
     "required": ["street", "city", "zip", "country"]},
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 30}, "start": {"type": "string", "format": "date-time"},
                                      "end": {"type": "string", "format": "date-time"}, "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 3}},
     "required": ["title", "start"]},
    {"type": "object", "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 25}, "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                                      "sort": {"enum": ["relevance", "date", "stars"]}}, "required": ["query"], "additionalProperties": False},
    {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, "price_cents": {"type": "integer", "minimum": 0, "maximum": 1000000},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 4}}, "required": ["sku", "price_cents"]},
    {"type": "object", "properties": {"sentiment": {"enum": ["positive", "negative", "neutral"]}, "confidence": {"type": "number", "minimum": 0}},
     "required": ["sentiment"], "additionalProperties": False},
    {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "object", "properties": {
        "text": {"type": "string", "maxLength": 20}, "label": {"enum": ["PERSON", "ORG", "PLACE"]}}, "required": ["text", "label"]}, "maxItems": 3}},
     "required": ["entities"]},
    {"type": "object", "properties": {"table": {"enum": ["users", "orders"]}, "columns": {"type": "array", "items": {"type": "string", "pattern": "^[a-z_]{1,12}$"}, "minItems": 1, "maxItems": 4},
                                      "where": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]}}, "required": ["table", "columns", "where"]},
    {"type": "object", "properties": {"recipe": {"type": "string", "maxLength": 30}, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
                                      "ingredients": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 15}, "grams": {"type": "integer", "minimum": 1, "maximum": 5000}},
                                                                                   "required": ["name", "grams"], "additionalProperties": False}, "minItems": 1, "maxItems": 3}},
     "required": ["recipe", "servings", "ingredients"]},
    {"type": "object", "properties": {"invoice": {"type": "string", "pattern": "^INV-\\d{6}$"}, "date": {"type": "string", "format": "date"},
                                      "total": {"type": "integer", "minimum": 0}}, "required": ["invoice", "date", "total"]},
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40}, "labels": {"type": "array", "items": {"enum": ["bug", "feature", "docs"]}, "maxItems": 2},
                                      "priority": {"type": "integer", "minimum": 1, "maximum": 4}}, "required": ["title", "labels"]},
    {"type": "object", "properties": {"level": {"enum": ["DEBUG", "INFO", "WARN", "ERROR"]}, "ts": {"type": "string", "format": "date-time"},
                                      "msg": {"type": "string", "maxLength": 40}, "request_id": {"type": "string", "format": "uuid"}}, "required": ["level", "ts", "msg"]},
    {"type": "object", "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}, "review": {"type": "string", "maxLength": 50}},
     "required": ["rating"], "additionalProperties": False},
    {"type": "object", "properties": {"page": {"type": "integer", "minimum": 1}, "per_page": {"type": "integer", "minimum": 1, "maximum": 100},
                                      "cursor": {"type": ["string", "null"], "maxLength": 16}}, "required": ["page"]},
    {"type": "object", "properties": {"lat_e6": {"type": "integer", "minimum": -90000000, "maximum": 90000000},
                                      "lon_e6": {"type": "integer", "minimum": -180000000, "maximum": 180000000}}, "required": ["lat_e6", "lon_e6"]},
    {"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                         "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                        "required": ["name", "children"]}}, "$ref": "#/$defs/node"},
    {"type": "object", "properties": {"status": {"enum": ["open", "closed", "merged"]}, "number": {"type": "integer", "minimum": 1}}, "required": ["status", "number"]},
    {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 1000}, {"type": "integer", "minimum": 0, "maximum": 1000}], "items": False, "minItems": 2},
    {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 100}},
    {"type": "object", "properties": {"answer": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 10}]}, "version": {"const": 2}},
     "required": ["answer", "version"]},
    {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+?[0-9]{7,12}$"}, "name": {"type": "string", "maxLength": 20}}, "required": ["phone"]},
    {"type": "object", "properties": {"reasoning": {"type": "string", "maxLength": 60}, "answer": {"type": "integer", "minimum": -1000, "maximum": 1000}},
     "required": ["reasoning", "answer"], "additionalProperties": False},
    {"type": "object", "properties": {"function": {"enum": ["get_weather", "search", "none"]}, "arguments": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 12}}},
     "required": ["function", "arguments"]},
    {"type": "object", "properties": {"colors": {"type": "array", "items": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}, "minItems": 1, "maxItems": 3}}, "required": ["colors"]},
    {"type": "object", "properties": {"yes": {"type": "boolean"}, "why": {"type": "string", "maxLength": 30}}, "required": ["yes"]},
    {"type": "object", "properties": {"time": {"type": "string", "format": "time"}, "room": {"type": "integer", "minimum": 100, "maximum": 999}}, "required": ["time", "room"]},
    {"type": "object", "properties": {"matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2, "maxItems": 2},
                                                 "minItems": 2, "maxItems": 2}}, "required": ["matrix"]},
    {"type": "object", "properties": {"user": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}, "handle": {"type": "string", "pattern": "^@[a-z0-9_]{3,12}$"}},
                                               "required": ["id", "handle"]}, "followers": {"type": "integer", "minimum": 0}}, "required": ["user"]},
    # decimal bounds (fractional, negative, exclusive, tiny and huge), multipleOf, uniqueItems, pattern with lengths
    {"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1},
                                      "t": {"type": "number", "exclusiveMinimum": -273.15, "maximum": 1e3}}, "required": ["p", "t"]},
    {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                      "lon": {"type": "number", "exclusiveMinimum": -180, "exclusiveMaximum": 180}},
     "required": ["lat", "lon"], "additionalProperties": False},
    {"type": "object", "properties": {"tiny": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e-3},
                                      "huge": {"type": "number", "minimum": -1e300, "maximum": 1e300},
                                      "neg": {"type": "number", "maximum": -0.5}, "price": {"type": "number", "minimum": 0.01, "exclusiveMaximum": 99.99}},
     "required": ["tiny", "huge", "neg", "price"]},
    {"type": "object", "properties": {"qty": {"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 500},
                                      "step": {"type": "integer", "multipleOf": 3}, "cents": {"type": "integer", "multipleOf": 100, "minimum": -100000}},
     "required": ["qty", "step", "cents"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["red", "green", "blue", "cyan"]}, "uniqueItems": True, "maxItems": 3}},
     "required": ["tags"]},
    {"type": "object", "properties": {"handle": {"type": "string", "pattern": "^[a-z]+$", "minLength": 3, "maxLength": 8},
                                      "code": {"type": "string", "pattern": "^[A-Z]{2}\\d*$", "maxLength": 5}}, "required": ["handle", "code"]},
]


def generated(n: int, seed: int = 20261203) -> list[dict]:
    rng = random.Random(seed)

    def leaf():
        k = rng.randrange(9)
        if k == 0:
            return {"type": "string", "maxLength": rng.randrange(1, 20)}
        if k == 1:
            lo = rng.randrange(-500, 500)
            return {"type": "integer", "minimum": lo, "maximum": lo + rng.randrange(0, 2000)}
        if k == 2:
            return {"type": "boolean"}
        if k == 3:
            return {"enum": rng.sample(["a", "b", "c", "dd", 1, 2, None, True], rng.randrange(1, 5))}
        if k == 4:
            return {"type": "string", "format": rng.choice(["date", "date-time", "uuid", "email", "time"])}
        if k == 5:
            return {"type": "string", "pattern": rng.choice(["^[a-z]{2,5}$", "^[0-9]{3}-[0-9]{2}$", "^(yes|no)$", "^x+y?$", "^[A-F0-9]{4}$"])}
        if k == 6:
            return {"type": ["integer", "null"]}
        if k == 7:
            return {"const": rng.choice(["v1", 3, False])}
        return {"type": "number", "minimum": 0}

    def node(depth):
        if depth >= 3 or rng.random() < 0.35:
            return leaf()
        if rng.random() < 0.6:
            names = rng.sample(["id", "name", "value", "items", "meta", "count", "flag", "when", "kind", "note"], rng.randrange(1, 5))
            props = {k: node(depth + 1) for k in names}
            req = [k for k in names if rng.random() < 0.6]
            s = {"type": "object", "properties": props, "required": req}
            if rng.random() < 0.5:
                s["additionalProperties"] = False
            return s
        if rng.random() < 0.7:
            lo = rng.randrange(0, 3)
            return {"type": "array", "items": node(depth + 1), "minItems": lo, "maxItems": lo + rng.randrange(0, 3)}
        return {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer", "minimum": 0, "maximum": 9}]}

    out = []
    while len(out) < n:
        s = node(0)
        if s.get("type") != "object":
            s = {"type": "object", "properties": {"result": s}, "required": ["result"]}
        out.append(s)
    return out


CORPUS = HAND + generated(100 - len(HAND) + 10)

"""The embedded web pages and the dashboard's JSON.

Without a server (always run): web/chat.html and web/dashboard.html are self-contained (no
http(s) or protocol-relative URL anywhere, nothing loaded from elsewhere, fetch() only to this
origin), small, build their DOM without HTML parsing of strings, reference only ids they define,
and their inline scripts parse (`node --check`, when node is installed).

Against a real `triad serve` on stories260K (skipped without TRIAD_BIN): GET / and GET /dashboard
serve those files byte for byte as text/html; charset=utf-8; GET /stats has exactly the documented
fields with the documented types, samples its history once a second, and counts a chat completion
(tokens, requests, latency); with --api-key the pages stay public while /stats needs the key.
Stdlib only."""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import STORIES, TINY_LLAMA, Server, need

WEB = Path(__file__).resolve().parents[2] / "web"
PAGES = {"/": "chat.html", "/dashboard": "dashboard.html"}
MAX_PAGE_BYTES = 64 * 1024
KEY_NAME = "triad_api_key"  # the localStorage key both pages share


# ---- plain HTTP (stdlib)


def http(method: str, url: str, body: dict | None = None, headers: dict | None = None, timeout: float = 60):
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(url, data=data, method=method, headers={**hdrs, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def get_json(url: str, headers: dict | None = None):
    status, hdrs, body = http("GET", url, headers=headers)
    assert status == 200, (url, status, body[:500])
    assert hdrs.get("content-type", "").startswith("application/json"), hdrs
    return json.loads(body)


# ---- the pages, parsed

URL_ATTRS = {"src", "href", "action", "formaction", "poster", "srcset", "data", "background", "ping",
             "xlink:href", "cite", "manifest", "codebase", "longdesc", "usemap", "icon", "imagesrcset"}


class Page(HTMLParser):
    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.text = text
        self.urls: list[tuple[str, str, str]] = []      # (tag, attribute, value)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []       # (attributes, inline text)
        self.styles: list[str] = []                     # <style> bodies and style attributes
        self.ids: list[str] = []
        self._open: tuple[str, dict, list] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        self.tags.append((tag, a))
        for k, v in a.items():
            if k in URL_ATTRS:
                self.urls.append((tag, k, v))
            if k == "style":
                self.styles.append(v)
            if k == "id":
                self.ids.append(v)
        if tag in ("script", "style"):
            self._open = (tag, a, [])

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            kind, a, buf = self._open
            if kind == "script":
                self.scripts.append((a, "".join(buf)))
            else:
                self.styles.append("".join(buf))
            self._open = None

    def handle_data(self, data):
        if self._open:
            self._open[2].append(data)

    @property
    def js(self) -> str:
        return "\n".join(s for _, s in self.scripts)


def page(name: str) -> Page:
    path = WEB / name
    assert path.is_file(), f"missing {path}"
    return Page(path.read_text(encoding="utf-8"))


pages = pytest.mark.parametrize("name", sorted(PAGES.values()))


@pages
def test_page_is_one_small_html_document(name):
    raw = (WEB / name).read_bytes()
    assert len(raw) <= MAX_PAGE_BYTES, f"{name}: {len(raw)} bytes > {MAX_PAGE_BYTES}"
    raw.decode("utf-8")  # strict
    p = page(name)
    assert p.text.lstrip().lower().startswith("<!doctype html>")
    tags = [t for t, _ in p.tags]
    assert any(t == "meta" and a.get("charset", "").lower() == "utf-8" for t, a in p.tags)
    assert any(t == "meta" and a.get("name") == "viewport" for t, a in p.tags)
    assert any(t == "html" and a.get("lang") for t, a in p.tags)
    assert "title" in tags
    # Light and dark.
    assert "prefers-color-scheme: dark" in "\n".join(p.styles)


@pages
def test_page_loads_nothing_from_elsewhere(name):
    p = page(name)
    # No absolute web URL anywhere in the file (attributes, CSS, scripts, text).
    assert not re.search(r"https?://", p.text, re.I), re.search(r".{0,60}https?://.{0,60}", p.text, re.I).group(0)
    for tag, attr, value in p.urls:
        v = value.strip()
        assert not v.startswith("//"), (tag, attr, value)      # protocol-relative
        scheme = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*):", v)
        assert scheme is None or scheme.group(1).lower() == "data", (tag, attr, value)
        if attr in ("src", "srcset", "poster", "data", "background", "imagesrcset"):
            assert v.startswith("data:"), (tag, attr, value)    # nothing fetched for display
    for tag, a in p.tags:
        assert tag not in ("iframe", "frame", "object", "embed", "base", "audio", "video"), tag
        if tag == "script":
            assert "src" not in a, a                             # inline scripts only
        if tag == "link":
            rel = a.get("rel", "").lower().split()
            assert not {"stylesheet", "preload", "prefetch", "preconnect", "dns-prefetch", "modulepreload",
                        "manifest", "import"} & set(rel), a
            assert a.get("href", "").startswith("data:"), a       # e.g. the favicon
    css = "\n".join(p.styles)
    assert "@import" not in css
    for u in re.findall(r"url\(\s*['\"]?([^'\")]*)", css):
        assert u.strip().startswith("data:"), u
    # Network access from the scripts: fetch() to this origin only, nothing else.
    js = p.js
    for forbidden in ("XMLHttpRequest", "WebSocket", "EventSource", "sendBeacon", "importScripts", "new Worker",
                      "serviceWorker", "import(", "window.open"):
        assert forbidden not in js, forbidden
    calls = re.findall(r"\bfetch\s*\(\s*([^,)]*)", js)
    assert calls, "no fetch() call found"
    for arg in calls:
        arg = arg.strip()
        lit = re.fullmatch(r"""(['"`])(.*)\1""", arg, re.S)
        if lit:
            assert lit.group(2).startswith("/") and not lit.group(2).startswith("//"), arg
        else:
            assert re.fullmatch(r"[A-Za-z_$][\w$.]*", arg), arg  # a variable (a path built in the page)
    # Same-origin paths the scripts name.
    for path in re.findall(r"""['"`](/[^'"`\s]*)['"`]""", js):
        assert not path.startswith("//"), path
    # A Content-Security-Policy that forbids anything else, as a second line of defence.
    csp = [a.get("content", "") for t, a in p.tags if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy"]
    assert csp and "default-src 'none'" in csp[0] and "connect-src 'self'" in csp[0], csp


@pages
def test_page_builds_its_dom_without_parsing_html_strings(name):
    """Model output and server strings are inserted as text, never parsed as HTML (no XSS)."""
    js = page(name).js
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment",
                 "DOMParser", "eval(", "new Function", "setTimeout('", 'setTimeout("', "srcdoc"):
        assert sink not in js, sink


@pages
def test_page_scripts_name_only_ids_that_exist(name):
    p = page(name)
    assert len(p.ids) == len(set(p.ids)), sorted({i for i in p.ids if p.ids.count(i) > 1})
    named = set(re.findall(r"""\$\(\s*['"]([\w-]+)['"]\s*\)""", p.js)) | \
        set(re.findall(r"""getElementById\(\s*['"]([\w-]+)['"]\s*\)""", p.js))
    assert named, "no element looked up by id"
    assert named <= set(p.ids), sorted(named - set(p.ids))
    for tag, a in p.tags:
        if tag == "label" and a.get("for"):
            assert a["for"] in p.ids, a
        for attr in ("aria-controls", "aria-describedby", "aria-labelledby"):
            for ref in a.get(attr, "").split():
                assert ref in p.ids, (tag, attr, ref)


def test_pages_link_to_each_other_and_share_the_key():
    chat, dash = page("chat.html"), page("dashboard.html")
    assert any(t == "a" and a.get("href") == "/dashboard" for t, a in chat.tags)
    assert any(t == "a" and a.get("href") == "/" for t, a in dash.tags)
    for p in (chat, dash):
        assert f"'{KEY_NAME}'" in p.js or f'"{KEY_NAME}"' in p.js
        assert "Bearer " in p.js
    assert "/v1/models" in chat.js and "/v1/chat/completions" in chat.js
    assert "/stats" in dash.js


@pages
def test_page_scripts_parse(name, tmp_path):
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    scripts = page(name).scripts
    assert scripts
    for i, (attrs, text) in enumerate(scripts):
        if attrs.get("type", "text/javascript") not in ("", "text/javascript", "module", "application/javascript"):
            continue  # data blocks (application/json, ...)
        f = tmp_path / f"{Path(name).stem}-{i}.{'mjs' if attrs.get('type') == 'module' else 'js'}"
        f.write_text(text, encoding="utf-8")
        r = subprocess.run([node, "--check", str(f)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{name} script {i}:\n{r.stderr}"


# ---- served by triad serve


@pytest.fixture(scope="module")
def web_server():
    need(STORIES)
    args = ["-m", str(STORIES), "--alias", "stories"]
    if TINY_LLAMA.exists():
        args += ["-m", str(TINY_LLAMA), "--alias", "tiny"]
    s = Server([*args, "--kv-cache-memory", "64MiB"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


@pytest.mark.parametrize("path", sorted(PAGES))
def test_pages_are_served_as_built(web_server, path):
    status, hdrs, body = http("GET", web_server.base + path)
    assert status == 200, body[:300]
    assert re.sub(r"\s+", "", hdrs.get("content-type", "")).lower() == "text/html;charset=utf-8", hdrs
    # Byte for byte the file in web/ (a mismatch means the binary was built from other pages).
    assert body == (WEB / PAGES[path]).read_bytes(), f"{path} differs from web/{PAGES[path]}: rebuild"


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def is_count(v) -> bool:
    return is_int(v) and v >= 0


TOP = {"time", "uptime_s", "version", "models"}
MODEL = {"id", "kind", "architecture", "weight_type", "weights_bytes", "kv_dtype", "kv_bytes_per_token",
         "max_model_len", "running", "waiting", "kv_blocks", "kv_bytes", "prefix_cache", "preemptions", "tokens",
         "speculative", "requests",
         "output_tokens_per_s", "latency", "history"}
SAMPLE = {"t", "output_tokens_per_s", "running", "waiting", "kv_used_blocks", "ttft_p50_s", "itl_p50_s"}


def check_stats(doc: dict, model_ids: list[str]) -> None:
    """The documented shape of GET /stats, field by field."""
    assert set(doc) == TOP, set(doc) ^ TOP
    assert is_num(doc["time"]) and abs(doc["time"] - time.time()) < 30, doc["time"]
    assert is_num(doc["uptime_s"]) and doc["uptime_s"] >= 0
    assert isinstance(doc["version"], str) and doc["version"].startswith("triad "), doc["version"]
    assert isinstance(doc["models"], list)
    assert [m.get("id") for m in doc["models"]] == model_ids  # the same models as /v1/models, in order
    for m in doc["models"]:
        where = m["id"]
        assert set(m) == MODEL, (where, set(m) ^ MODEL)
        assert m["kind"] in ("chat", "base", "embedding"), where
        for k in ("architecture", "weight_type", "kv_dtype"):
            assert isinstance(m[k], str) and m[k], (where, k, m[k])
        assert is_int(m["weights_bytes"]) and m["weights_bytes"] > 0, where
        assert is_int(m["kv_bytes_per_token"]) and m["kv_bytes_per_token"] > 0, where
        assert is_int(m["max_model_len"]) and m["max_model_len"] > 0, where
        for k in ("running", "waiting", "preemptions"):
            assert is_count(m[k]), (where, k, m[k])

        kv = m["kv_blocks"]
        assert set(kv) == {"total", "used", "cached", "free", "block_tokens"}, (where, kv)
        assert all(is_count(v) for v in kv.values()), (where, kv)
        assert kv["total"] > 0 and kv["block_tokens"] > 0, (where, kv)
        assert kv["used"] + kv["cached"] + kv["free"] == kv["total"], (where, kv)  # the bar's three parts

        kb = m["kv_bytes"]
        assert set(kb) == {"used", "total"} and is_count(kb["used"]) and kb["total"] > 0, (where, kb)
        assert kb["used"] <= kb["total"], (where, kb)

        pc = m["prefix_cache"]
        assert set(pc) == {"queries", "hits", "hit_rate"}, (where, pc)
        assert is_count(pc["queries"]) and is_count(pc["hits"]) and pc["hits"] <= pc["queries"], (where, pc)
        assert is_num(pc["hit_rate"]) and 0 <= pc["hit_rate"] <= 1, (where, pc)
        if pc["queries"]:
            assert abs(pc["hit_rate"] - pc["hits"] / pc["queries"]) < 1e-9, (where, pc)

        assert set(m["tokens"]) == {"prompt", "generated"} and all(is_count(v) for v in m["tokens"].values()), where
        sp = m["speculative"]
        assert set(sp) == {"draft_tokens", "accepted_tokens", "acceptance_rate", "row_cost_share", "by_source"}, (where, sp)
        assert is_count(sp["draft_tokens"]) and is_count(sp["accepted_tokens"]), (where, sp)
        assert is_num(sp["row_cost_share"]) and 0 <= sp["row_cost_share"] <= 1, (where, sp)
        assert set(sp["by_source"]) == {"lookup", "draft_model"}, (where, sp)
        for src in sp["by_source"].values():
            assert set(src) == {"draft_tokens", "accepted_tokens"} and all(is_count(v) for v in src.values()), (where, sp)
            assert src["accepted_tokens"] <= src["draft_tokens"], (where, sp)
        for key in ("draft_tokens", "accepted_tokens"):
            assert sum(src[key] for src in sp["by_source"].values()) == sp[key], (where, sp)
        assert sp["accepted_tokens"] <= sp["draft_tokens"] and 0 <= sp["acceptance_rate"] <= 1, (where, sp)
        if sp["draft_tokens"]:
            assert abs(sp["acceptance_rate"] - sp["accepted_tokens"] / sp["draft_tokens"]) < 1e-9, (where, sp)
        rq = m["requests"]
        assert set(rq) == {"ok", "error", "cancelled", "rejected", "embedding"}, (where, rq)
        assert all(is_count(v) for v in rq.values()), (where, rq)
        assert is_num(m["output_tokens_per_s"]) and m["output_tokens_per_s"] >= 0, where

        lat = m["latency"]
        assert set(lat) == {"window_s", "count", "ttft_s", "itl_s", "e2e_s"}, (where, lat)
        assert is_num(lat["window_s"]) and lat["window_s"] > 0 and is_count(lat["count"]), (where, lat)
        for k in ("ttft_s", "itl_s", "e2e_s"):
            p = lat[k]
            assert set(p) == {"p50", "p90", "p99"}, (where, k, p)
            assert all(v is None or (is_num(v) and v >= 0) for v in p.values()), (where, k, p)
            if lat["count"] == 0:
                continue
            if k != "itl_s":  # a request with one token has no inter-token gap
                assert all(is_num(v) for v in p.values()), (where, k, p)
            if all(is_num(v) for v in p.values()):
                assert p["p50"] <= p["p90"] <= p["p99"], (where, k, p)

        h = m["history"]
        assert isinstance(h, list) and len(h) <= 300, (where, len(h))
        for x in h:
            assert set(x) == SAMPLE, (where, x)
            assert is_num(x["t"]) and is_num(x["output_tokens_per_s"]) and x["output_tokens_per_s"] >= 0, (where, x)
            assert is_count(x["running"]) and is_count(x["waiting"]) and is_count(x["kv_used_blocks"]), (where, x)
            assert x["kv_used_blocks"] <= kv["total"], (where, x)
            for k in ("ttft_p50_s", "itl_p50_s"):
                assert x[k] is None or (is_num(x[k]) and x[k] >= 0), (where, x)
        ts = [x["t"] for x in h]
        assert ts == sorted(ts) and len(set(ts)) == len(ts), (where, ts)  # oldest first
        if ts:
            assert ts[-1] <= doc["time"] + 1, (where, ts[-1], doc["time"])


def model_ids(s) -> list[str]:
    return [m["id"] for m in get_json(s.base + "/v1/models")["data"]]


def test_stats_has_the_documented_fields(web_server):
    s = web_server
    status, hdrs, body = http("GET", s.base + "/stats")
    assert status == 200, body[:300]
    assert hdrs["content-type"].startswith("application/json"), hdrs
    check_stats(json.loads(body), model_ids(s))


def test_stats_history_is_sampled_each_second(web_server):
    s = web_server
    deadline = time.time() + 15
    while True:
        doc = get_json(s.base + "/stats")
        h = doc["models"][0]["history"]
        if len(h) >= 3 or time.time() > deadline:
            break
        time.sleep(0.5)
    assert len(h) >= 3, h
    gaps = [b["t"] - a["t"] for a, b in zip(h, h[1:])]
    assert all(0.5 <= g <= 3 for g in gaps), gaps
    up1 = doc["uptime_s"]
    time.sleep(1.1)
    doc2 = get_json(s.base + "/stats")
    assert doc2["uptime_s"] > up1 and doc2["time"] > doc["time"]
    check_stats(doc2, model_ids(s))


def test_stats_count_a_chat_completion(web_server):
    s = web_server
    url = s.base + "/v1/chat/completions"
    body = {"model": "stories", "messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 12,
            "temperature": 0, "ignore_eos": True}
    status, _, resp = http("POST", url, body)
    assert status == 200, resp[:500]
    assert json.loads(resp)["usage"]["completion_tokens"] == 12
    # And one streamed, the way the chat page asks.
    status, hdrs, resp = http("POST", url, {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200 and hdrs["content-type"].startswith("text/event-stream"), resp[:500]
    assert resp.rstrip().endswith(b"data: [DONE]")

    deadline = time.time() + 15
    while True:
        doc = get_json(s.base + "/stats")
        m = next(x for x in doc["models"] if x["id"] == "stories")
        done = (m["tokens"]["generated"] >= 24 and m["requests"]["ok"] >= 2 and m["latency"]["count"] >= 2 and
                any(x["output_tokens_per_s"] > 0 for x in m["history"]) and m["running"] == 0 and
                m["kv_blocks"]["used"] == 0)
        if done or time.time() > deadline:
            break
        time.sleep(0.25)
    check_stats(doc, model_ids(s))
    assert m["tokens"]["generated"] >= 24 and m["tokens"]["prompt"] > 0, m["tokens"]
    assert m["requests"]["ok"] >= 2 and m["requests"]["error"] == 0, m["requests"]
    lat = m["latency"]
    assert lat["count"] >= 2, lat
    for k in ("ttft_s", "itl_s", "e2e_s"):
        assert all(is_num(v) and v > 0 for v in lat[k].values()), (k, lat[k])
    assert lat["ttft_s"]["p50"] <= lat["e2e_s"]["p99"], lat
    assert any(x["output_tokens_per_s"] > 0 for x in m["history"]), m["history"][-5:]
    assert m["running"] == 0 and m["waiting"] == 0, m  # both finished
    assert m["kv_blocks"]["used"] == 0, m["kv_blocks"]   # their blocks went back (free or cached)


def test_pages_are_public_and_stats_need_the_key():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--api-key", "secret-123"])
    try:
        status, _, body = http("GET", s.base + "/stats")
        assert status == 401, body[:300]
        assert json.loads(body)["error"]["code"] == "invalid_api_key"
        status, _, body = http("GET", s.base + "/stats", headers={"Authorization": "Bearer secret-124"})
        assert status == 401, body[:300]
        doc = get_json(s.base + "/stats", headers={"Authorization": "Bearer secret-123"})
        check_stats(doc, ["stories"])
        # What the chat page calls first needs it too (the page then asks for the key).
        status, _, _ = http("GET", s.base + "/v1/models")
        assert status == 401
        for path, name in PAGES.items():
            status, hdrs, body = http("GET", s.base + path)
            assert status == 200, (path, body[:300])
            assert hdrs["content-type"].lower().startswith("text/html"), hdrs
            assert body == (WEB / name).read_bytes()
    finally:
        assert s.stop() == 0

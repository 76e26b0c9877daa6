"""`--log-format json` (issue 16): every log line is one JSON object with ts / level / msg, and each
request adds one `request` event with its id, model, token counts, TTFT, end-to-end time and finish
reason; the default text format writes the same event as key=value pairs."""
from __future__ import annotations

import json
import urllib.request

from conftest import STORIES, Server, need


def complete(s: Server, max_tokens: int) -> None:
    req = urllib.request.Request(s.base_url + "/completions",
                                 json.dumps({"model": "stories", "prompt": "Once upon a time", "max_tokens": max_tokens,
                                             "temperature": 0}).encode(), {"Content-Type": "application/json"})
    json.load(urllib.request.urlopen(req, timeout=60))


def test_json_log_lines_and_request_events():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories", "--log-format", "json"])
    complete(s, 7)
    complete(s, 3)
    assert s.stop() == 0
    objs = []
    for line in "".join(s.log).splitlines():
        if line.startswith("triad:"):  # the start-up banner goes to stdout as text
            continue
        if line.strip():
            objs.append(json.loads(line))  # every log line is JSON
    assert all("ts" in o and o["level"] in ("debug", "info", "warn", "error") for o in objs)
    assert any(o.get("msg", "").startswith("loading ") for o in objs)
    reqs = [o for o in objs if o.get("event") == "request"]
    assert [r["completion_tokens"] for r in reqs] == [7, 3], reqs
    for r in reqs:
        assert r["model"] == "stories" and r["outcome"] == "ok" and r["finish"] == "length"
        assert r["id"].startswith("req-") and r["prompt_tokens"] >= 4 and r["cached_tokens"] >= 0
        assert 0 < r["ttft_ms"] <= r["e2e_ms"]
    assert reqs[0]["id"] != reqs[1]["id"]


def test_text_request_line():
    need(STORIES)
    s = Server(["-m", str(STORIES), "--alias", "stories"])
    complete(s, 2)
    assert s.stop() == 0
    lines = [l for l in "".join(s.log).splitlines() if "info: request " in l]
    assert len(lines) == 1 and "model=stories" in lines[0] and "completion_tokens=2" in lines[0], lines


def test_an_unread_stderr_never_stalls_serving():
    """A server whose log pipe nobody reads (a stuck log driver) keeps answering: its log lines
    queue and, once the queue is full, are dropped and counted (triad_log_lines_dropped_total),
    and a warning says so once the pipe is read again. Before the asynchronous writer, about
    400 request lines filled the 64 KiB pipe and the engine thread blocked in write(2)."""
    import time
    need(STORIES)
    # A 64-line queue (TRIAD_LOG_QUEUE_LINES) fills after ~64 requests beyond the pipe's ~400.
    s = Server(["-m", str(STORIES), "--alias", "stories"], env={"TRIAD_LOG_QUEUE_LINES": "64"})
    s._pause_drain()  # from now on nobody reads the pipe
    t0 = time.time()
    for _ in range(1500):
        complete(s, 1)
    assert time.time() - t0 < 120
    metrics = urllib.request.urlopen(s.base + "/metrics").read().decode()
    dropped = int(next(l for l in metrics.splitlines() if l.startswith("triad_log_lines_dropped_total")).split()[-1])
    assert dropped > 0, "the queue never filled: send more requests"
    s._resume_drain()
    assert s.stop() == 0
    log = "".join(s.log)
    assert "log lines were dropped" in log

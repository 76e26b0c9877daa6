#!/usr/bin/env python3
"""Speculative decoding benchmark (issue #17 item 5): what prompt-lookup drafting buys on the
workloads where it applies, and what it costs where it does not.

One `triad serve` (--speculative ngram, or with --draft-model --speculative draft; a request
turns drafting off with num_speculative_tokens: 0), greedy chat completions, streamed. Workloads:

  edit       a ~60-line Python module and an instruction to rename one function and return the
             whole module: the answer mostly copies the prompt.
  predicted  the same request with OpenAI's `prediction` set to the original module.
  story      a short story: little to copy from.

Single stream: each workload alternates off / on (--rounds times). Decode speed is
(completion tokens - 1) / (time from the first content chunk to the last); the acceptance rate
comes from usage.completion_tokens_details (accepted / rejected_prediction_tokens). Whether the
two answers are the same text is printed too: they must be, since every kernel is batch-invariant
(on AVX-512 the quantized weights are re-laid at load for kernels that serve every token count
alike); only a server run with --no-repack and without --batch-invariant may sum a 1-token and a
5-token step in different orders, so a near-tie may go the other way, exactly as batching can.
Streams (--streams N > 1): N closed-loop clients of one workload at once, off then on; output
tokens/s over all of them from the server's triad_generation_tokens_total over --window seconds
after --warmup (drafting stops while more than --spec-max-running requests run).

Standard library only.

usage: bench/spec_bench.py --model MODEL.gguf [--draft-model SMALL.gguf] [--bin BIN] [--threads 2] [--rounds 3]
           [--max-tokens 256] [--spec-tokens 4] [--streams 16] [--batch-invariant]
           [--workloads edit,predicted,story] [--extra "--spec-max-running 4"]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

MODULE = '''import csv
import statistics
from dataclasses import dataclass


@dataclass
class Row:
    name: str
    city: str
    age: int
    score: float


def parse_rows(path):
    """Reads a CSV file of name, city, age, score into Row objects."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for record in reader:
            rows.append(Row(record["name"], record["city"], int(record["age"]), float(record["score"])))
    return rows


def mean_score_by_city(rows):
    """Returns a dict from city to the mean score of its rows."""
    by_city = {}
    for row in rows:
        by_city.setdefault(row.city, []).append(row.score)
    return {city: statistics.mean(scores) for city, scores in by_city.items()}


def oldest(rows, n=3):
    """Returns the n oldest rows, oldest first."""
    return sorted(rows, key=lambda row: row.age, reverse=True)[:n]


def report(path):
    rows = parse_rows(path)
    means = mean_score_by_city(rows)
    for city in sorted(means):
        print(f"{city}: {means[city]:.2f}")
    for row in oldest(rows):
        print(f"{row.name} ({row.age}) from {row.city}")


if __name__ == "__main__":
    import sys
    report(sys.argv[1])
'''

EDIT = ("Here is a Python module:\n\n```python\n" + MODULE + "```\n\n"
        "Rename the function `parse_rows` to `load_rows` everywhere it appears. Reply with the complete "
        "updated module in one code block and nothing else.")
STORY = "Write a short story of about 200 words about a lighthouse keeper who finds a message in a bottle."


def body(workload, max_tokens, spec):
    msgs = [{"role": "user", "content": STORY if workload == "story" else EDIT}]
    b = {"model": "m", "messages": msgs, "max_tokens": max_tokens, "temperature": 0, "stream": True,
         "stream_options": {"include_usage": True}}
    if workload == "predicted":
        b["prediction"] = {"type": "content", "content": "```python\n" + MODULE + "```"}
    if not spec:
        b["num_speculative_tokens"] = 0
    return b


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def stream(port, b):
    """Posts a streaming chat completion; returns (text, completion_tokens, decode_seconds, usage)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(b), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status}: {r.read()[:500]!r}")
    text, usage, t_first, t_last = "", None, None, None
    buf = b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            line = ev.decode()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                piece = ch.get("delta", {}).get("content")
                if piece:
                    now = time.perf_counter()
                    t_first = t_first or now
                    t_last = now
                    text += piece
    c.close()
    return text, usage["completion_tokens"], (t_last - t_first) if t_first else 0.0, usage


def single(port, a):
    print(f"| workload | round | spec | tokens | decode tokens/s | accepted / drafted | same text |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for w in a.workloads:
        for rnd in range(1, a.rounds + 1):
            res = {}
            for spec in (False, True):
                text, n, dt, u = stream(port, body(w, a.max_tokens, spec))
                d = u.get("completion_tokens_details", {})
                acc, rej = d.get("accepted_prediction_tokens", 0), d.get("rejected_prediction_tokens", 0)
                rate = (n - 1) / dt if dt > 0 else 0.0
                res[spec] = (text, rate)
                summary.setdefault((w, spec), []).append(rate)
                same = "" if not spec else ("yes" if text == res[False][0] else "NO")
                print(f"| {w} | {rnd} | {'on' if spec else 'off'} | {n} | {rate:.2f} | {acc} / {acc + rej} | {same} |",
                      flush=True)
    print()
    print("| workload | decode tokens/s off | on | on / off |")
    print("|---|---|---|---|")
    for w in a.workloads:
        off = sorted(summary[(w, False)])[len(summary[(w, False)]) // 2]
        on = sorted(summary[(w, True)])[len(summary[(w, True)]) // 2]
        print(f"| {w} | {off:.2f} | {on:.2f} | {on / off:.2f}x |")
    print()


def generated(port):
    """The server's triad_generation_tokens_total."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith("triad_generation_tokens_total{"):
            return float(line.split()[-1])
    raise SystemExit("no triad_generation_tokens_total in /metrics")


def streams(port, a):
    print("| workload | streams | spec | output tokens/s (all streams) |")
    print("|---|---|---|---|")
    for w in a.workloads:
        for spec in (False, True):
            stop = threading.Event()

            def client(w=w, spec=spec):
                while not stop.is_set():
                    stream(port, body(w, a.max_tokens, spec))

            ts = [threading.Thread(target=client, daemon=True) for _ in range(a.streams)]
            for t in ts:
                t.start()
            time.sleep(a.warmup)
            n0, t0 = generated(port), time.perf_counter()
            time.sleep(a.window)
            n1, t1 = generated(port), time.perf_counter()
            stop.set()
            for t in ts:
                t.join()
            print(f"| {w} | {a.streams} | {'on' if spec else 'off'} | {(n1 - n0) / (t1 - t0):.2f} |", flush=True)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "apps", "triad", "triad"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--spec-tokens", type=int, default=4)
    ap.add_argument("--streams", type=int, default=0)
    ap.add_argument("--window", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--batch-invariant", action="store_true")
    ap.add_argument("--workloads", default="edit,predicted,story")
    ap.add_argument("--draft-model", default="", help="--speculative draft with this draft model")
    ap.add_argument("--extra", default="", help="more `triad serve` arguments")
    a = ap.parse_args()
    a.workloads = a.workloads.split(",")
    port = free_port()
    method = ["--speculative", "draft", "--draft-model", a.draft_model] if a.draft_model else ["--speculative", "ngram"]
    cmd = [a.bin, "serve", "-m", a.model, "--alias", "m", "--port", str(port), "-t", str(a.threads), *method,
           "--num-speculative-tokens", str(a.spec_tokens), *a.extra.split()]
    if a.batch_invariant:
        cmd.append("--batch-invariant")
    print("cpu:", subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True, capture_output=True,
                                 text=True).stdout.strip(), f"| threads {a.threads} | {' '.join(cmd[1:])}")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.5)
        stream(port, body("story", 8, False))  # warm-up
        single(port, a)
        if a.streams > 1:
            streams(port, a)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())

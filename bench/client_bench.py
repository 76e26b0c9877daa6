#!/usr/bin/env python3
"""Client-side serving benchmark against an OpenAI-compatible server, measured the way the
field's tools measure it (streaming; time to first token at the first chunk with content;
inter-token latency between content chunks; time per output token; p50/p90/p99; output
tokens/s from `usage`).

It sends /v1/completions requests whose prompts are random token ids (exactly --prompt-len
tokens; the same mix `triad bench serve` uses in-process) with ignore_eos, so every request
generates exactly --gen-len tokens. Standard library only.

usage: bench/client_bench.py --base http://127.0.0.1:8080 --model NAME
           [--concurrency 1,4,16,64] [--rates 1,2,4] [-N 64] [--prompt-len 76] [--gen-len 128]
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import threading
import time
import urllib.parse


def percentile(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    k = (len(v) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def one_request(base, model, prompt, gen_len):
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": gen_len, "temperature": 0,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft, times, usage = None, [], None
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(4096)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    continue
                obj = json.loads(data)
                now = time.perf_counter()
                if obj.get("usage"):
                    usage = obj["usage"]
                if obj.get("choices"):
                    if ttft is None:
                        ttft = now - t0
                    times.append(now)
    e2e = time.perf_counter() - t0
    conn.close()
    itl = [b - a for a, b in zip(times, times[1:])]
    n_out = usage["completion_tokens"] if usage else len(times)
    tpot = (e2e - ttft) / (n_out - 1) if n_out > 1 else float("nan")
    return {"ttft": ttft, "itl": itl, "tpot": tpot, "e2e": e2e, "n_out": n_out}


def run(base, model, n, concurrency, rate, prompt_len, gen_len, n_vocab, seed):
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, n_vocab) for _ in range(prompt_len)] for _ in range(n)]
    gaps = [rng.expovariate(rate) if rate else 0.0 for _ in range(n)]
    results, errors = [], []
    sem = threading.Semaphore(concurrency)
    lock = threading.Lock()

    def worker(p):
        try:
            r = one_request(base, model, p, gen_len)
            with lock:
                results.append(r)
        except Exception as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(str(e))
        finally:
            sem.release()

    threads = []
    t0 = time.perf_counter()
    for p, gap in zip(prompts, gaps):
        if rate:
            time.sleep(gap)
        sem.acquire()
        t = threading.Thread(target=worker, args=(p,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    out_tokens = sum(r["n_out"] for r in results)
    ttft = [r["ttft"] for r in results]
    itl = [x for r in results for x in r["itl"]]
    tpot = [r["tpot"] for r in results]
    return {
        "requests": len(results), "errors": len(errors), "wall_s": wall, "output_tok_s": out_tokens / wall,
        "ttft_mean": statistics.mean(ttft) if ttft else float("nan"),
        "ttft": [percentile(ttft, p) for p in (50, 90, 99)],
        "itl": [percentile(itl, p) for p in (50, 90, 99)],
        "tpot": [percentile(tpot, p) for p in (50, 90, 99)],
        "tpot_mean": statistics.mean(tpot) if tpot else float("nan"),
        "first_error": errors[0] if errors else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="http://127.0.0.1:8080")
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--rates", default="", help="Poisson arrival rates in requests/s (each run is -N requests)")
    ap.add_argument("-N", "--requests", type=int, default=0, help="requests per run (default: 2 x concurrency, at least 8)")
    ap.add_argument("--prompt-len", type=int, default=76)
    ap.add_argument("--gen-len", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("POST", "/tokenize", json.dumps({"model": a.model, "prompt": "x"}), {"Content-Type": "application/json"})
    conn.getresponse().read()
    n_vocab = 32000  # token ids are drawn below this (and checked by the server)
    conn.request("GET", "/v1/models")
    info = json.loads(conn.getresponse().read())
    conn.close()
    assert any(m["id"] == a.model for m in info["data"]), f"model {a.model} not served"
    # Stay inside the vocabulary of small models: ask the server to detokenize a probe id.
    for cand in (151000, 100000, 32000, 512):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("POST", "/detokenize", json.dumps({"model": a.model, "tokens": [cand - 1]}), {"Content-Type": "application/json"})
        ok = c.getresponse().status == 200
        c.close()
        if ok:
            n_vocab = cand
            break
    print(f"| mode | requests | output tok/s | mean TTFT s | TTFT p50/p90/p99 s | ITL p50/p90/p99 ms | TPOT p50/p90/p99 ms | errors |")
    print("|---|---|---|---|---|---|---|---|")

    def show(label, r):
        ms = lambda v: "/".join(f"{x * 1000:.1f}" for x in v)  # noqa: E731
        s = lambda v: "/".join(f"{x:.3f}" for x in v)  # noqa: E731
        print(f"| {label} | {r['requests']} | {r['output_tok_s']:.1f} | {r['ttft_mean']:.3f} | {s(r['ttft'])} | "
              f"{ms(r['itl'])} | {ms(r['tpot'])} | {r['errors']} |", flush=True)
        if r["first_error"]:
            print("first error:", r["first_error"])

    for c in [int(x) for x in a.concurrency.split(",") if x]:
        n = a.requests or max(8, 2 * c)
        show(f"concurrency {c}", run(a.base, a.model, n, c, 0, a.prompt_len, a.gen_len, n_vocab, a.seed))
    for rate in [float(x) for x in a.rates.split(",") if x]:
        n = a.requests or 32
        show(f"Poisson {rate:g} req/s", run(a.base, a.model, n, 10**6, rate, a.prompt_len, a.gen_len, n_vocab, a.seed))


if __name__ == "__main__":
    main()

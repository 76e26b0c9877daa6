#!/usr/bin/env python3
"""Client-side embeddings benchmark against an OpenAI-compatible server (/v1/embeddings).

Sentences of about 30 tokens (fixed-seed random English words, so every server sees the same
text) are sent two ways:
  * batches: one client sends requests of B sentences back to back (--batch-sizes), reporting
    embeddings/s and request latency percentiles (batch 1 gives a single sentence's latency);
  * concurrency: C clients each send single-sentence requests back to back (--concurrency),
    reporting embeddings/s and latency percentiles: what a server sees from many callers.
Every client keeps one HTTP/1.1 connection open. Responses are JSON floats ("float"), checked
for the right count and dimension. Standard library only; the client shares the machine with
the server, equally for every server measured.

usage: bench/embed_bench.py --base http://127.0.0.1:8080 --model NAME
           [--batch-sizes 1,16,64] [--concurrency 1,16,64] [--seconds 10] [--warmup 2]
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

WORDS = ("the a of and to in is was he for it with as his on be at by had not are but from or have an they "
         "which one you were her all she there would their we him been has when who will more no if out so "
         "said what up its about into than them can only other new some time could these two may then do "
         "first any my now such like our over man me even most made after also did many before must through "
         "years where much your way well down should because each just those people how too little state "
         "good very make world still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go came right used take "
         "three river garden engine memory paper window morning question answer distance village kernel").split()


def sentences(n: int, seed: int = 1) -> list[str]:
    """n sentences of 25-29 words (about 30 WordPiece tokens with [CLS] and [SEP])."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w = [rng.choice(WORDS) for _ in range(rng.randint(25, 29))]
        out.append(" ".join(w).capitalize() + ".")
    return out


def percentile(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Client:
    def __init__(self, base: str, model: str):
        u = urllib.parse.urlparse(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        self.model = model
        self.path = (u.path.rstrip("/") or "") + "/v1/embeddings"

    def embed(self, texts: list[str]) -> int:
        body = json.dumps({"model": self.model, "input": texts, "encoding_format": "float"})
        self.conn.request("POST", self.path, body, {"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:300]!r}")
        r = json.loads(data)
        if len(r["data"]) != len(texts):
            raise RuntimeError(f"{len(r['data'])} embeddings for {len(texts)} inputs")
        return len(r["data"][0]["embedding"])


def run_clients(base, model, n_clients, batch, seconds, warmup, pool):
    """n_clients threads send `batch`-sentence requests for `seconds` after `warmup` seconds.
    Returns (embeddings/s, latencies of the measured requests)."""
    lat: list[float] = []
    count = [0]
    lock = threading.Lock()
    start = time.perf_counter()
    t_measure = start + warmup
    t_end = t_measure + seconds
    errors: list[str] = []

    def worker(k):
        c = Client(base, model)
        rng = random.Random(k)
        try:
            while True:
                texts = [pool[rng.randrange(len(pool))] for _ in range(batch)]
                t0 = time.perf_counter()
                if t0 >= t_end:
                    return
                c.embed(texts)
                t1 = time.perf_counter()
                if t0 >= t_measure and t1 <= t_end:
                    with lock:
                        lat.append(t1 - t0)
                        count[0] += batch
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return count[0] / seconds, lat


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--batch-sizes", default="1,16,64")
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    pool = sentences(512)
    dim = Client(a.base, a.model).embed(pool[:2])
    print(f"# {a.label or a.base}: model {a.model!r}, {dim} dimensions, {a.seconds:g} s per point")
    print(f"{'mode':<14} {'emb/s':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'requests':>9}")
    for b in [int(x) for x in a.batch_sizes.split(",") if x]:
        rate, lat = run_clients(a.base, a.model, 1, b, a.seconds, a.warmup, pool)
        print(f"{'batch ' + str(b):<14} {rate:8.1f} {1e3 * statistics.median(lat):8.2f} {1e3 * percentile(lat, 90):8.2f} "
              f"{1e3 * percentile(lat, 99):8.2f} {len(lat):9d}", flush=True)
    for c in [int(x) for x in a.concurrency.split(",") if x]:
        rate, lat = run_clients(a.base, a.model, c, 1, a.seconds, a.warmup, pool)
        print(f"{'concurrent ' + str(c):<14} {rate:8.1f} {1e3 * statistics.median(lat):8.2f} {1e3 * percentile(lat, 90):8.2f} "
              f"{1e3 * percentile(lat, 99):8.2f} {len(lat):9d}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The first hour's two performance claims (issue 16), measured client-side.

1. Start-up: from spawning `triad serve -m MODEL` to the first streamed token of a chat answer
   (warm disk: one unmeasured start first). Each run reports when the server said it was ready
   (its "serving ... on http://..." line), the first token's TTFT, and the total.
2. The pages cost nothing: 16 concurrent streams (client_bench.py's mix: 76 random prompt ids,
   128 tokens out, ignore_eos) with the dashboard closed and open (headless chromium through
   chromium-driver + selenium, the page polling /stats every second), alternating
   closed / open, --rounds times, each round with new prompts (a new seed) so that the prefix
   cache does not serve a repeat.

usage: bench/first_hour_bench.py --triad build/apps/triad/triad -m models/qwen2.5-0.5b-q4_k_m.gguf
           [--starts 5] [--rounds 3] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_bench  # noqa: E402


def start(triad, model, threads, extra=()):
    t0 = time.perf_counter()
    p = subprocess.Popen([triad, "serve", "-m", model, "--alias", "m", "--port", "0", "--threads", str(threads), *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for line in p.stdout:
        m = re.search(r"serving .* on http://[^:]+:(\d+)/v1", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        raise RuntimeError("triad serve did not start")
    ready = time.perf_counter() - t0
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()  # keep the pipe drained
    return p, port, t0, ready


def first_token(port):
    body = json.dumps({"model": "m", "stream": True, "max_tokens": 8,
                       "messages": [{"role": "user", "content": "What is the capital of France?"}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                obj = json.loads(line[6:])
                if obj.get("choices") and obj["choices"][0]["delta"].get("content"):
                    return time.perf_counter(), time.perf_counter() - t0
    raise RuntimeError("no token")


def stop(p):
    p.terminate()
    p.wait(timeout=60)


def startup(a):
    print(f"## start-up to first token ({os.path.basename(a.model)}, --threads {a.threads}; one warm-up start)")
    print("| run | ready s | TTFT s | spawn to first token s |\n|---|---|---|---|")
    totals = []
    for i in range(a.starts + 1):
        p, port, t0, ready = start(a.triad, a.model, a.threads)
        t_tok, ttft = first_token(port)
        stop(p)
        if i == 0:
            continue
        totals.append(t_tok - t0)
        print(f"| {i} | {ready:.3f} | {ttft:.3f} | {t_tok - t0:.3f} |", flush=True)
    print(f"median spawn to first token: {statistics.median(totals):.3f} s\n")


def dashboard(a):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    p, port, _, _ = start(a.triad, a.model, a.threads)
    base = f"http://127.0.0.1:{port}"
    opts = Options()
    for x in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        opts.add_argument(x)
    drv = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)
    print(f"## 16 concurrent streams, dashboard closed vs open ({os.path.basename(a.model)}, --threads {a.threads})")
    print("closed: no page; poll: /stats fetched once a second without a browser (what the page asks of the server);")
    print("open: the page in headless chromium on the same cores. CPU s: the browser's processes' CPU time in the run.\n")
    print("| round | dashboard | output tok/s | TPOT p50 ms | TTFT p50 s | browser CPU s | server CPU s |\n|---|---|---|---|---|---|---|")
    modes = ("closed", "poll", "open")
    res = {m: [] for m in modes}
    try:
        client_bench.run(base, "m", 16, 16, 0, 76, 16, 151000, 999)  # warm-up
        for rnd in range(a.rounds):
            for k, mode in enumerate(modes):
                drv.get(base + "/dashboard" if mode == "open" else "about:blank")
                if mode == "open":
                    time.sleep(2)  # the page has loaded and polls /stats once a second
                stop_poll = threading.Event()
                if mode == "poll":
                    def poll():
                        while not stop_poll.wait(1.0):
                            urllib.request.urlopen(base + "/stats", timeout=10).read()
                    threading.Thread(target=poll, daemon=True).start()
                b0, s0 = cpu_seconds("chrom"), cpu_seconds(pid=p.pid)
                r = client_bench.run(base, "m", 16, 16, 0, 76, 128, 151000, 100 + 3 * rnd + k)
                b1, s1 = cpu_seconds("chrom"), cpu_seconds(pid=p.pid)
                stop_poll.set()
                res[mode].append(r["output_tok_s"])
                print(f"| {rnd + 1} | {mode} | {r['output_tok_s']:.1f} | {r['tpot'][0] * 1000:.1f} | {r['ttft'][0]:.3f} | "
                      f"{b1 - b0:.1f} | {s1 - s0:.1f} |", flush=True)
    finally:
        drv.quit()
        stop(p)
    c = statistics.mean(res["closed"])
    print("mean output tok/s: " + ", ".join(f"{m} {statistics.mean(res[m]):.1f} ({statistics.mean(res[m]) / c:.3f} of closed)"
                                             for m in modes) + "\n")


def cpu_seconds(name: str = "", pid: int = 0) -> float:
    """User + system CPU seconds of one process, or of every process whose name contains name."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or (pid and int(d) != pid):
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        if pid or name in comm:
            fields = st[st.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--triad", default="build/apps/triad/triad")
    ap.add_argument("-m", "--model", default="models/qwen2.5-0.5b-q4_k_m.gguf")
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["startup", "dashboard"], default=None)
    a = ap.parse_args()
    if a.only in (None, "startup"):
        startup(a)
    if a.only in (None, "dashboard"):
        dashboard(a)


if __name__ == "__main__":
    main()

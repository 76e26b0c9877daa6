#!/usr/bin/env python3
"""Contention benchmark (issue #17 item 4): how much of its quiet speed Triad keeps when it
shares the cores, side by side with llama.cpp.

1. Single-stream decode. `triad bench -p 0 -n 64` quiet, then beside one busy process (a
   Python spin loop: one core's worth of competing work), and the same with llama.cpp's
   llama-bench (--peer-bin) and an older Triad build (--old-bin), alternating in rounds. The
   figure is busy tokens/s as a share of quiet tokens/s from the same round.
2. Two models served side by side (--serve-models A B): one `triad serve -m A -m B`, 16
   closed-loop streams (non-streaming /v1/completions, ignore_eos, --gen-len tokens) on A alone,
   on B alone, then on both at once. Output tokens/s per model come from the server's
   `triad_generation_tokens_total` over a fixed window after a warm-up, so the phases are
   measured over the same length of time. The figure is each model's tokens/s with both busy as
   a share of its own tokens/s alone.

Standard library only.

usage: bench/contention_bench.py --decode-model MODEL [--serve-models A B] [--bin BIN]
           [--old-bin BIN] [--peer-bin DIR] [--threads 2] [--rounds 2] [--reps 3]
           [--streams 16] [--window 30] [--warmup 8] [--gen-len 128]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

BUSY = [sys.executable, "-c", "while True: pass"]


def tg_triad(binary, model, threads, reps, n):
    out = subprocess.run([binary, "bench", "-m", model, "-p", "0", "-n", str(n), "-r", str(reps), "-t", str(threads),
                          "--no-roofline"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\|\s*tg%d\s*\|\s*([0-9.]+)" % n, out)
    if not m:
        raise SystemExit("no tg figure in triad bench output:\n" + out)
    return float(m.group(1))


def tg_peer(peer_dir, model, threads, reps, n):
    out = subprocess.run([os.path.join(peer_dir, "llama-bench"), "-m", model, "-p", "0", "-n", str(n), "-r", str(reps),
                          "-t", str(threads)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\|\s*tg%d\s*\|\s*([0-9.]+)" % n, out)
    if not m:
        raise SystemExit("no tg figure in llama-bench output:\n" + out)
    return float(m.group(1))


def decode_part(a):
    runners = [("triad", lambda: tg_triad(a.bin, a.decode_model, a.threads, a.reps, a.n_gen))]
    if a.old_bin:
        runners.append(("triad (old build)", lambda: tg_triad(a.old_bin, a.decode_model, a.threads, a.reps, a.n_gen)))
    if a.peer_bin:
        runners.append(("llama.cpp", lambda: tg_peer(a.peer_bin, a.decode_model, a.threads, a.reps, a.n_gen)))
    print(f"## Single-stream decode tg{a.n_gen}, {a.threads} threads, quiet and beside one busy process\n")
    print(f"model: {a.decode_model}\n")
    print("| round | engine | quiet tok/s | busy tok/s | busy / quiet |")
    print("|---|---|---|---|---|")
    for rnd in range(1, a.rounds + 1):
        for name, run in runners:
            quiet = run()
            busy_proc = subprocess.Popen(BUSY)
            try:
                time.sleep(1)
                busy = run()
            finally:
                busy_proc.kill()
                busy_proc.wait()
            print(f"| {rnd} | {name} | {quiet:.2f} | {busy:.2f} | {100 * busy / quiet:.0f}% |", flush=True)
    print()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return r.read().decode()


def generated(base):
    out = {}
    for line in get(base, "/metrics").splitlines():
        m = re.match(r'triad_generation_tokens_total\{model="([^"]+)"\} ([0-9.e+]+)', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


class Streams:
    """n closed-loop clients of one model until stop()."""

    def __init__(self, port, model, n, gen_len, seed):
        self.port, self.model, self.gen_len = port, model, gen_len
        self.stop_flag = threading.Event()
        self.errors = []
        rng = random.Random(seed)
        words = "the a river city light old new market song window quiet story road green winter".split()
        self.threads = [threading.Thread(target=self.loop, args=(" ".join(rng.choice(words) for _ in range(60)),), daemon=True)
                        for _ in range(n)]
        for t in self.threads:
            t.start()

    def loop(self, prompt):
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": self.gen_len, "temperature": 0.8,
                           "ignore_eos": True})
        while not self.stop_flag.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
                c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
                r = c.getresponse()
                data = r.read()
                if r.status != 200:
                    self.errors.append(f"{r.status} {data[:200]!r}")
                c.close()
            except OSError as e:
                self.errors.append(repr(e))
                time.sleep(0.1)

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join()


def serve_part(a, binary, label):
    port = free_port()
    cmd = [binary, "serve", "--port", str(port), "-t", str(a.threads)]
    # Plain decoding, comparable with builds from before speculative decoding (which lack the flag).
    if "--speculative" in subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout:
        cmd += ["--speculative", "off"]
    for m in a.serve_models:
        cmd += ["-m", m]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            try:
                if json.loads(get(base, "/health")).get("status") == "ok":
                    break
            except (OSError, ValueError):
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit(f"{label}: the server did not start")
            time.sleep(0.5)
        names = [m["id"] for m in json.loads(get(base, "/v1/models"))["data"]]

        def phase(models):
            streams = [Streams(port, m, a.streams, a.gen_len, i) for i, m in enumerate(models)]
            time.sleep(a.warmup)
            g0, t0 = generated(base), time.time()
            time.sleep(a.window)
            g1, t1 = generated(base), time.time()
            for s in streams:
                s.stop()
                if s.errors:
                    raise SystemExit(f"{label}: {len(s.errors)} failed requests, first: {s.errors[0]}")
            return {m: (g1.get(m, 0) - g0.get(m, 0)) / (t1 - t0) for m in models}

        solo = {}
        for m in names:
            solo[m] = phase([m])[m]
        both = phase(names)
        for m in names:
            print(f"| {label} | {m} | {solo[m]:.1f} | {both[m]:.1f} | {100 * both[m] / solo[m]:.0f}% |", flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/apps/triad/triad")
    ap.add_argument("--old-bin", default="")
    ap.add_argument("--peer-bin", default="", help="llama.cpp's build/bin (llama-bench)")
    ap.add_argument("--decode-model", default="")
    ap.add_argument("--serve-models", nargs="*", default=[])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n-gen", type=int, default=64)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=8)
    ap.add_argument("--gen-len", type=int, default=128)
    a = ap.parse_args()
    if a.decode_model:
        decode_part(a)
    if a.serve_models:
        print(f"## {len(a.serve_models)} models in one server, {a.streams} streams each, {a.threads} threads\n")
        print(f"window {a.window:.0f} s after {a.warmup:.0f} s of warm-up; {a.gen_len} tokens per request\n")
        print("| build | model | alone tok/s | both busy tok/s | share |")
        print("|---|---|---|---|---|")
        serve_part(a, a.bin, "triad")
        if a.old_bin:
            serve_part(a, a.old_bin, "triad (old build)")


if __name__ == "__main__":
    main()

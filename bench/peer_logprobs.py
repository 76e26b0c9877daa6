#!/usr/bin/env python3
"""Cross-checks Triad against llama.cpp on the same GGUF: the next-token top-5 logprobs after a
fixed 61-token prompt, from `triad serve` (/v1/completions) and llama.cpp's `llama-server`
(/completion with n_probs), one server at a time. An independent implementation agreeing to a
few thousandths on a random-weight model is strong evidence that an architecture (routing, MLA,
YaRN, sinks, ...) is computed the same way; the golden tests against tests/reference stay the
evidence that runs in CI (llama.cpp is not installed there).

usage: PEER_BIN=/path/to/llama.cpp/build/bin bench/peer_logprobs.py MODEL.gguf [MODEL.gguf ...]
       [TRIAD_BIN=build/apps/triad/triad]

Prints each model's top tokens from both and the largest |difference| over the tokens both list.
Standard library only.
"""
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIAD = os.environ.get("TRIAD_BIN", os.path.join(ROOT, "build", "apps", "triad", "triad"))
PEER = os.environ.get("PEER_BIN", "")
PROMPT = [1] + [(7 * i * i + 3 * i + 11) % 500 + 3 for i in range(60)]  # ids < 503: any vocabulary


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=300).read())


def wait_up(url, proc):
    for _ in range(600):
        if proc.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return True
        except Exception:
            time.sleep(0.5)
    return False


def served(cmd, url, ask):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_up(url, p):
            return None
        return ask()
    finally:
        p.terminate()
        p.wait()


def triad_top(model):
    def ask():
        r = post("http://127.0.0.1:18093/v1/completions",
                 {"model": "m", "prompt": PROMPT, "max_tokens": 1, "logprobs": 5, "temperature": 0})
        return r["choices"][0]["logprobs"]["top_logprobs"][0]
    return served([TRIAD, "serve", "-m", model, "--alias", "m", "--port", "18093", "--threads", "2"],
                  "http://127.0.0.1:18093/v1/models", ask)


def peer_top(model):
    def ask():
        r = post("http://127.0.0.1:18094/completion",
                 {"prompt": PROMPT, "n_predict": 1, "n_probs": 5, "temperature": 0, "post_sampling_probs": False})
        probs = r.get("completion_probabilities")
        if not probs:
            return {}
        return {e["token"]: e["logprob"] for e in probs[0]["top_logprobs"]}
    return served([os.path.join(PEER, "llama-server"), "-m", model, "--port", "18094", "-t", "2", "-c", "512",
                   "-np", "1"], "http://127.0.0.1:18094/health", ask)


def main():
    if not PEER or len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    for model in sys.argv[1:]:
        ours, theirs = triad_top(model), peer_top(model)
        print(os.path.basename(model))
        if ours is None or theirs is None:
            print("  a server did not start (llama.cpp may not load this file)")
            continue
        if not theirs:
            print("  llama-server returned no probabilities")
            continue
        for label, top in (("triad", ours), ("llama.cpp", theirs)):
            print(f"  {label:9s}", {t: round(v, 4) for t, v in sorted(top.items(), key=lambda kv: -kv[1])})
        shared = set(ours) & set(theirs)
        if shared:
            print(f"  max |difference| over {len(shared)} shared tokens: "
                  f"{max(abs(ours[t] - theirs[t]) for t in shared):.4f}")


if __name__ == "__main__":
    main()

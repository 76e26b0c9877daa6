"""Reproducible sampling: the same request (seeded sampling at temperature 1, and greedy) gives
the same tokens and bitwise the same logprobs whether it runs alone, again with its prefix
cached (a hit that leaves fewer than 8 tokens to compute), or in a batch of 16 with other
traffic in a KV pool small enough to force preemption; for every weight type. The model is a
random-weight qwen2 whose rows are all multiples of 256 (bench/make_bench_model.py --shape
tiny), quantized with `triad quantize` (FP8 and INT8: converted at load), so no type falls back
to another; and the mixture-of-experts qwen3moe and qwen2moe (shared expert) of the golden
tests, whose steps group tokens by expert (16 concurrent requests equal the same requests alone). The servers run with
--batch-invariant, which the AVX-512 kernels of thirteen types need and which changes nothing on
scalar and AVX2 CPUs (their kernels are invariant by construction)."""
from __future__ import annotations

import concurrent.futures as cf
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, Server
from test_openai_sdk import httpx

ROOT = Path(__file__).resolve().parents[2]
TYPES = ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "IQ4_NL", "IQ4_XS",
         "Q3_K_M", "Q2_K", "MXFP4_MOE", "BF16", "FP8", "INT8", "QWEN3MOE", "QWEN2MOE", "DEEPSEEK2",
         "GPT-OSS"]
# QWEN3MOE: the mixture-of-experts synthetic model of the golden tests (tests/reference/
# make_synthetic.py: 8 experts, 2 per token, F32), whose tokens are grouped by expert in every step.
# DEEPSEEK2: the latent-attention model (grouped sigmoid routing, one latent KV row per token).
# GPT-OSS: attention sinks, sliding-window layers (whose blocks are freed) between full ones.
VOCAB = {"QWEN3MOE": 512, "QWEN2MOE": 512, "DEEPSEEK2": 512, "GPT-OSS": 512}
# KV pools of about 256 tokens (qwen2moe's 2 layers of 2 x 16-wide KV heads take a third of the
# others' bytes per token), so 16 requests of ~55 tokens must preempt.
# deepseek2's 3 layers of one 64-value latent row take half of the tiny model's bytes per token.
KV_MEMORY = {"QWEN2MOE": "64KiB", "DEEPSEEK2": "96KiB", "GPT-OSS": "96KiB"}
ONLINE = {"FP8": "fp8_e4m3", "INT8": "int8"}  # converted from F16 at load (--weight-type)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    if not BIN:
        pytest.skip("TRIAD_BIN is not set")
    d = tmp_path_factory.mktemp("det")
    base = d / "tiny-f16.gguf"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_bench_model.py"), str(base), "--shape", "tiny",
                    "--type", "f16"], check=True, capture_output=True)
    out = {}
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    import make_synthetic
    for name in ("qwen3moe", "qwen2moe", "deepseek2", "gpt-oss"):
        spec = next(sp for sp in make_synthetic.SPECS if sp.name == name)
        out[name.upper()] = d / f"{name}.gguf"
        make_synthetic.write_model(str(out[name.upper()]), spec, make_synthetic.make_weights(spec), lambda n: "f32")
    for t in TYPES:
        if t in out:
            continue
        if t == "F16" or t in ONLINE:
            out[t] = base
            continue
        p = d / f"tiny-{t.lower()}.gguf"
        subprocess.run([BIN, "quantize", str(base), str(p), t], check=True, capture_output=True)
        out[t] = p
    return out


def prompts(n_vocab=1024):
    """16 prompts: a shared 40-token prefix (two and a half 16-token blocks) and distinct tails
    of 3 to 6 tokens, so a warm prefix cache leaves fewer than 8 tokens to compute."""
    rng = random.Random(7)
    prefix = [rng.randrange(259, n_vocab) for _ in range(40)]
    return [prefix + [rng.randrange(259, n_vocab) for _ in range(3 + i % 4)] for i in range(16)]


def ask(s, prompt, i, max_tokens=12, **extra):
    body = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "logprobs": 2, "seed": 1000 + i,
            "temperature": 0.0 if i % 4 == 0 else 1.0, "ignore_eos": True, **extra}
    r = httpx.post(s.base_url + "/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    ch = r.json()["choices"][0]
    lp = ch["logprobs"]
    return (ch["text"], lp["token_logprobs"], lp["top_logprobs"]), r.json()["usage"]


def metric(s, name):
    m = re.search(rf'^{name}{{model="m"}} ([0-9.e+-]+)$', httpx.get(s.base + "/metrics").text, re.M)
    return float(m.group(1))


@pytest.mark.parametrize("wtype", TYPES)
def test_results_do_not_depend_on_the_batch_or_the_cache(models, wtype):
    n_vocab = VOCAB.get(wtype, 1024)
    ps = prompts(n_vocab)
    # A pool of 24 blocks of 16 tokens: 16 requests of ~55 tokens cannot all stay resident.
    online = ["--weight-type", ONLINE[wtype]] if wtype in ONLINE else []
    # Speculative decoding (prompt lookup) is the server default here: the pass with the prefix
    # cached and the batched pass with predictions verify drafts.
    s = Server(["-m", str(models[wtype]), "--alias", "m", "--batch-invariant", "--max-seqs", "16",
                "--kv-cache-memory", KV_MEMORY.get(wtype, "192KiB"), "--kv-block-size", "16", *online,
                "--speculative", "ngram", "--spec-ngram-min", "1", "--spec-max-running", "32"])
    try:
        alone = [ask(s, p, i, num_speculative_tokens=0)[0] for i, p in enumerate(ps)]
        # Again, one at a time: the shared prefix is now cached.
        warm = []
        cached = 0
        for i, p in enumerate(ps):
            res, usage = ask(s, p, i)
            warm.append(res)
            cached += usage["prompt_tokens_details"]["cached_tokens"]
        assert cached > 0, "the second pass should hit the prefix cache"
        for i in range(len(ps)):
            assert warm[i] == alone[i], f"{wtype}: request {i} changed with its prefix cached"
        # All at once, with four long requests of other traffic in the same steps (long-running,
        # so they overlap the 16 however fast the steps are, and their growth forces preemption).
        # How many run at once depends on how fast the HTTP requests arrive, so on a loaded
        # machine a pass may see no preemption: up to three passes, each checked.
        before = metric(s, "triad_preemptions_total")
        rng = random.Random(3)
        other = [[rng.randrange(259, n_vocab) for _ in range(120)] for _ in range(4)]
        for _ in range(3):
            with cf.ThreadPoolExecutor(20) as ex:
                # (Plain decoding: the 16 and the noise last as long as they always did; the
                # batched pass with predictions below verifies drafts.)
                futs = [ex.submit(ask, s, p, i, num_speculative_tokens=0) for i, p in enumerate(ps)]
                noise = [ex.submit(ask, s, p, 99, 64, num_speculative_tokens=0) for p in other]
                batched = [f.result()[0] for f in futs]
                for f in noise:
                    f.result()
            for i in range(len(ps)):
                assert batched[i] == alone[i], f"{wtype}: request {i} changed in a batch of 16 with other traffic"
            if metric(s, "triad_preemptions_total") > before:
                break
        assert metric(s, "triad_preemptions_total") > before, "the small pool should force preemption"
        # Batched again, each request predicting its own output text with a stray character near
        # its end: long runs of drafts are accepted, wrong ones rejected, and nothing changes.
        drafted = metric(s, "triad_spec_decode_draft_tokens_total")
        with cf.ThreadPoolExecutor(16) as ex:
            futs = []
            for i, p in enumerate(ps):
                toks = alone[i][0]
                futs.append(ex.submit(ask, s, p, i, prediction={"type": "content", "content": toks[:-3] + "x" + toks[-3:]}))
            predicted = [f.result() for f in futs]
        for i in range(len(ps)):
            assert predicted[i][0] == alone[i], f"{wtype}: request {i} changed with a prediction"
        accepted = sum(u["completion_tokens_details"]["accepted_prediction_tokens"] for _, u in predicted)
        rejected = sum(u["completion_tokens_details"]["rejected_prediction_tokens"] for _, u in predicted)
        assert accepted > 0 and rejected >= 0
        assert metric(s, "triad_spec_decode_draft_tokens_total") - drafted == accepted + rejected
        assert metric(s, "triad_spec_decode_accepted_tokens_total") > 0
    finally:
        assert s.stop() == 0, "".join(s.log[-20:])


def test_system_fingerprint_follows_weights_and_settings(models):
    """system_fingerprint is stable for one build, model and setting, and changes with the
    weights (another quantization of the same model) and with the kernels' batch invariance
    when that changes the arithmetic."""
    def fp(path, *extra):
        s = Server(["-m", str(path), "--alias", "m", *extra])
        try:
            r = httpx.post(s.base_url + "/completions", json={"model": "m", "prompt": [300, 301], "max_tokens": 1})
            return r.json()["system_fingerprint"]
        finally:
            s.stop()
    a = fp(models["Q4_0"])
    assert a.startswith("fp_") and len(a) == 15
    assert fp(models["Q4_0"]) == a
    assert fp(models["Q8_0"]) != a
    assert fp(models["F16"]) != fp(models["F16"], "--weight-type", "fp8_e4m3")

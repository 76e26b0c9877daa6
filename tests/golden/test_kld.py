"""`triad perplexity --kl-divergence-base / --kl-divergence` against an independent numpy
computation over the same stored logits, on stories260K (F32 base) and its Q4_K_M quantization:

  * The base file has llama.cpp's layout (magic, n_ctx, n_vocab, n_chunk, tokens, one record
    of scale, min log-prob and uint16 codes per scored position) and its records decode to the
    base model's log-softmax (from `triad eval-logits`) within one code step, except the
    clamp at max - 16.
  * The candidate's figures (mean / median / p99 KLD, top-1 agreement, PPL of both, their
    ratio, dp) equal numpy's from the base records and the candidate's own logits.
  * An imatrix from one part of a book lowers the KLD of Q4_1, Q5_0 and IQ4_NL files on
    another part (stories260K's real weights).
"""
import json
import os

import numpy as np
import pytest

import golden_util as gu
from test_stories import LONG_STORY

N_CTX, N_CHUNKS = 64, 3


def read_base(path):
    raw = open(path, "rb").read()
    assert raw[:8] == b"_logits_"
    n_ctx, n_vocab, n_chunk = np.frombuffer(raw[8:20], dtype="<u4")[0], *np.frombuffer(raw[12:20], dtype="<i4")
    n_ctx = int(n_ctx)
    toks = np.frombuffer(raw, dtype="<i4", count=n_ctx * n_chunk, offset=20).reshape(n_chunk, n_ctx)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    per = n_ctx - 1 - n_ctx // 2
    rec = np.frombuffer(raw, dtype="<u2", offset=20 + 4 * n_ctx * n_chunk).reshape(n_chunk, per, nv)
    assert rec.size == n_chunk * per * nv  # nothing left over
    scale = rec[..., 0:2].copy().view("<f4")[..., 0]
    min_lp = rec[..., 2:4].copy().view("<f4")[..., 0]
    logp = scale[..., None].astype(np.float64) * rec[..., 4:4 + n_vocab] + min_lp[..., None]
    return n_ctx, n_vocab, toks, logp, scale


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_kld_equals_numpy(stories, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(LONG_STORY, encoding="utf-8")
    base = tmp_path / "base.kld"
    gu.run_triad(["perplexity", "-m", stories, "-f", str(text), "--ctx", N_CTX, "--chunks", N_CHUNKS,
                  "--kl-divergence-base", str(base), "--threads", gu.DEFAULT_THREADS])
    n_ctx, n_vocab, toks, base_lp, scale = read_base(base)
    assert (n_ctx, toks.shape[0]) == (N_CTX, N_CHUNKS)
    stream = gu.tokenize(stories, LONG_STORY)
    assert toks.reshape(-1).tolist() == stream[:N_CTX * N_CHUNKS]
    first = n_ctx // 2

    def chunk_logits(model, k):
        ids = toks[k].tolist()
        ids[0] = 1  # BOS
        return gu.eval_logits(model, ids, n_vocab)[first:n_ctx - 1]

    # The base records decode to the base model's log-softmax.
    for k in range(N_CHUNKS):
        want = log_softmax(chunk_logits(stories, k))
        keep = want > want.max(axis=-1, keepdims=True) - 15.99
        err = np.abs(base_lp[k] - want)[keep].max()
        assert err <= scale[k].max() * 0.51 + 1e-5, f"chunk {k}: decoded log-probs off by {err}"

    cand = tmp_path / "q4km.gguf"
    gu.run_triad(["quantize", stories, str(cand), "Q4_K_M"])
    js = tmp_path / "kld.json"
    gu.run_triad(["perplexity", "-m", str(cand), "--kl-divergence-base", str(base), "--kl-divergence",
                  "--json", str(js), "--threads", gu.DEFAULT_THREADS])
    got = json.loads(js.read_text())

    kld, nll, nll_b, top, dp = [], [], [], [], []
    for k in range(N_CHUNKS):
        q = log_softmax(chunk_logits(str(cand), k))
        p = base_lp[k]
        nxt = toks[k, first + 1:n_ctx]
        r = np.arange(len(nxt))
        kld += list(np.where(p > -16, np.exp(p) * (p - q), 0).sum(axis=-1))
        nll += list(-q[r, nxt])
        nll_b += list(-p[r, nxt])
        top += list(q.argmax(-1) == p.argmax(-1))
        dp += list(np.exp(q[r, nxt]) - np.exp(p[r, nxt]))
    kld, nll, nll_b, dp = map(np.array, (kld, nll, nll_b, dp))
    n = len(kld)
    assert got["count"] == n
    close = lambda a, b, tol=2e-5: abs(a - b) <= tol * max(1.0, abs(b))  # noqa: E731
    assert close(got["kld_mean"], kld.mean()), (got["kld_mean"], kld.mean())
    assert close(got["kld_err"], kld.std() / np.sqrt(n - 1), 1e-3)
    assert close(got["kld_median"], np.median(kld), 1e-4)
    assert close(got["kld_p99"], np.percentile(kld, 99), 1e-4)
    assert close(got["ppl"], np.exp(nll.mean())) and close(got["ppl_base"], np.exp(nll_b.mean()))
    assert close(got["ppl_ratio"], np.exp(nll.mean() - nll_b.mean()))
    assert got["top1"] == pytest.approx(np.mean(top), abs=1e-8)
    assert close(got["dp_mean"], dp.mean(), 1e-4)
    assert close(got["dp_rms"], np.sqrt((dp ** 2).mean()), 1e-4)
    assert 0 < got["kld_mean"] < 0.5 and got["top1"] > 0.6  # a 4-bit model stays close


def test_imatrix_lowers_kld_on_real_weights(stories, models_dir, tmp_path):
    """Activation-aware quantization on stories260K's real F32 weights: with an imatrix from one
    part of Pride and Prejudice, Q4_1 / Q5_0 / IQ4_NL files (what its 64-wide rows allow) are
    closer to the F32 model on another part of the book than without it."""
    book = os.path.join(models_dir, "prideprejudice.txt")
    if not os.path.exists(book):
        pytest.skip(f"{book} missing (scripts/fetch_models.sh writes it)")
    text = open(book, encoding="utf-8").read()
    calib, held_out = tmp_path / "calib.txt", tmp_path / "eval.txt"
    calib.write_text(text[:80000], encoding="utf-8")
    held_out.write_text(text[-80000:], encoding="utf-8")
    base = tmp_path / "base.kld"
    gu.run_triad(["perplexity", "-m", stories, "-f", str(held_out), "--ctx", 128, "--chunks", 24,
                  "--kl-divergence-base", str(base)])
    im = tmp_path / "imatrix.gguf"
    gu.run_triad(["imatrix", "-m", stories, "-f", str(calib), "--ctx", 128, "--chunks", 24, "-o", str(im)])
    for t in ["Q4_1", "Q5_0", "IQ4_NL"]:
        kld = {}
        for use in (False, True):
            q = tmp_path / f"{t}-{use}.gguf"
            gu.run_triad(["quantize", "--pure", *(["--imatrix", str(im)] if use else []), stories, str(q), t])
            js = tmp_path / f"{t}-{use}.json"
            gu.run_triad(["perplexity", "-m", str(q), "--kl-divergence-base", str(base), "--kl-divergence",
                          "--json", str(js)])
            kld[use] = json.loads(js.read_text())
        plain, guided = kld[False], kld[True]
        # The runs are deterministic and paired (same tokens), so a plain margin is enough:
        # measured 0.178 -> 0.136 (Q4_1), 0.054 -> 0.047 (Q5_0), 0.166 -> 0.155 (IQ4_NL) here.
        print(f"{t}: KLD {plain['kld_mean']:.4f} -> {guided['kld_mean']:.4f} with the imatrix")
        assert guided["kld_mean"] < 0.97 * plain["kld_mean"], (t, plain, guided)

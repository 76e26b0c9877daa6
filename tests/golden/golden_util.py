"""Helpers of the golden tests: driving the `triad` binary, caching reference results, and
comparing logits.

What it is: the glue between the C++ engine (env TRIAD_BIN, CLI contract: eval-logits,
tokenize, run) and the numpy reference (tests/reference/ref_model.py).

Properties:
  * A test is skipped with a message only when TRIAD_BIN is unset; a missing subcommand
    (`require`), any failure of the binary or any numeric disagreement fails.
  * Reference results are cached as .npz files in $TRIAD_REF_CACHE (golden.cmake points it
    into the build tree; default: <tmp>/triad-ref-cache), keyed by a hash of the model file's
    sha256, the inputs, and the source of the reference itself (editing ref_model.py
    invalidates the cache). Files are written to a temporary name and renamed, so concurrent
    test processes never read a partial file.

Thread-safety: module-level memo dicts; use from one thread (pytest runs tests serially).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.normpath(os.path.join(HERE, "..", "reference"))
if REF_DIR not in sys.path:
    sys.path.insert(0, REF_DIR)

import ref_model  # noqa: E402

CACHE_DIR = os.environ.get("TRIAD_REF_CACHE") or os.path.join(tempfile.gettempdir(),
                                                               "triad-ref-cache")


def _source_hash(*names) -> str:
    h = hashlib.sha256()
    for n in names:
        with open(os.path.join(REF_DIR, n), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


REF_VERSION = _source_hash("ref_model.py")

# ----------------------------------------------------------------------------------------------
# The binary
# ----------------------------------------------------------------------------------------------

_help_cache: dict = {}


def triad_bin() -> str:
    b = os.environ.get("TRIAD_BIN", "")
    if not b or not os.path.isfile(b) or not os.access(b, os.X_OK):
        pytest.skip(f"TRIAD_BIN not set or not an executable file ({b!r})")
    return b


def require(subcommand: str) -> str:
    """Returns the binary, failing the test unless `triad --help` lists `subcommand` and
    `triad SUBCOMMAND --help` exits 0. (Every subcommand the golden tests use exists now, so a
    missing one is a regression, not a reason to skip; only an unset TRIAD_BIN skips.)"""
    b = triad_bin()
    if subcommand not in _help_cache:
        ok = False
        try:
            top = subprocess.run([b, "--help"], capture_output=True, text=True, timeout=30)
            if subcommand in top.stdout:
                sub = subprocess.run([b, subcommand, "--help"], capture_output=True, text=True,
                                     timeout=30)
                ok = sub.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        _help_cache[subcommand] = ok
    if not _help_cache[subcommand]:
        pytest.fail(f"{b} has no working '{subcommand}' subcommand")
    return b


def run_triad(args, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """Runs triad with args; fails the test (with its stderr) on a non-zero exit or timeout."""
    cmd = [triad_bin()] + [str(a) for a in args]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}")
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace")[-3000:]
        pytest.fail(f"exit code {p.returncode}: {' '.join(cmd)}\n{err}")
    return p


# One thread by default: on a loaded 2-core machine a 2-thread pool is many times slower (its
# threads wait on each other); the multi-threaded paths get their own tests.
DEFAULT_THREADS = 1


def eval_logits(model: str, tokens, n_vocab: int, chunk: int | None = None,
                threads: int | None = DEFAULT_THREADS, weight_type: str | None = None) -> np.ndarray:
    """`triad eval-logits`: float32 logits [len(tokens), n_vocab]."""
    require("eval-logits")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.f32")
        args = ["eval-logits", "-m", model, "--tokens", ",".join(str(int(t)) for t in tokens),
                "--out", out]
        if chunk:
            args += ["--chunk", chunk]
        if weight_type:
            args += ["--weight-type", weight_type]
        if threads:
            args += ["--threads", threads]
        run_triad(args)
        data = np.fromfile(out, dtype="<f4")
    want = len(tokens) * n_vocab
    assert data.size == want, f"eval-logits wrote {data.size} floats, expected {want}"
    return data.reshape(len(tokens), n_vocab).astype(np.float64)


def tokenize(model: str, text: str) -> list:
    """`triad tokenize`: the ids on the last non-empty stdout line."""
    require("tokenize")
    p = run_triad(["tokenize", "-m", model, "-p", text])
    lines = [ln for ln in p.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]
    assert lines, "tokenize printed nothing"
    return [int(t) for t in lines[-1].split()]


def run_greedy(model: str, prompt: str, n: int, chat: bool = False,
               threads: int = DEFAULT_THREADS):
    """`triad run --temp 0 --ids-out`: (stdout text, generated ids)."""
    require("run")
    with tempfile.TemporaryDirectory() as d:
        ids_path = os.path.join(d, "ids.txt")
        args = ["run", "-m", model, "-p", prompt, "-n", n, "--temp", 0, "--ids-out", ids_path,
                "--threads", threads]
        if chat:
            args.append("--chat")
        p = run_triad(args)
        with open(ids_path, encoding="utf-8") as f:
            ids = [int(s) for s in f.read().split()]
    return p.stdout.decode("utf-8", "replace"), ids


# ----------------------------------------------------------------------------------------------
# Cached reference results
# ----------------------------------------------------------------------------------------------

_sha_memo: dict = {}
_model_memo: dict = {}


def file_sha256(path: str) -> str:
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _sha_memo:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _sha_memo[key] = h.hexdigest()
    return _sha_memo[key]


def reference_model(path: str, act_quant: bool = False, online: str | None = None) -> ref_model.RefModel:
    key = (os.path.realpath(path), act_quant, online)
    if key not in _model_memo:
        _model_memo[key] = ref_model.RefModel(path, act_quant=act_quant, online=online)
    return _model_memo[key]


def _cached(kind: str, model: str, params, compute) -> dict:
    os.makedirs(CACHE_DIR, exist_ok=True)
    key = hashlib.sha256(json.dumps([kind, REF_VERSION, file_sha256(model), params],
                                    sort_keys=True).encode()).hexdigest()[:32]
    path = os.path.join(CACHE_DIR, f"{kind}-{key}.npz")
    if os.path.exists(path):
        try:
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError):
            pass  # a damaged cache file: recompute
    res = compute()
    fd, tmp = tempfile.mkstemp(dir=CACHE_DIR, suffix=".npz")
    os.close(fd)
    np.savez(tmp, **res)
    os.replace(tmp, path)
    return res


def ref_logits(model: str, tokens, act_quant: bool = False, online: str | None = None) -> np.ndarray:
    """Reference float64 logits [len(tokens), n_vocab] at positions 0..len-1 (cached); online:
    the model as --weight-type fp8_e4m3 / int8 loads it (ref_model.online_quantize)."""
    toks = [int(t) for t in tokens]
    params = {"tokens": toks, "act_quant": act_quant}
    if online:
        params["online"] = online
    res = _cached("logits", model, params,
                  lambda: {"logits": reference_model(model, act_quant, online).logits(toks)})
    return res["logits"]


def ref_int8_tie_margins(model: str, tokens) -> np.ndarray:
    """Per position, how close the reference's per-token int8 activation rounding came to a tie
    (ref_model.rounding_tie_margin, least over the row's projection inputs; cached)."""
    toks = [int(t) for t in tokens]

    def compute():
        rm = reference_model(model, False, "int8")
        rm.logits(toks)
        return {"margins": np.asarray(rm.tie_margin, dtype=np.float64)}

    return _cached("int8ties", model, {"tokens": toks}, compute)["margins"]


def token_pieces(model: str, ids) -> list:
    """The vocabulary strings (tokenizer.ggml.tokens) of ids (cached)."""
    want = [int(t) for t in ids]

    def compute():  # the reference model holds the metadata (and is needed anyway)
        toks = reference_model(model).metadata["tokenizer.ggml.tokens"]
        return {"pieces": np.array([toks[i] for i in want])}

    return [str(p) for p in _cached("pieces", model, {"ids": want}, compute)["pieces"]]


def ref_greedy(model: str, prompt_ids, n: int, top_k: int = 32) -> dict:
    """Reference greedy continuation (cached): ids [m] (m <= n; stops after EOS), and for
    every step the top_k candidates (top_ids [m, k], top_logits [m, k]) and the largest
    |logit| of the row (row_scale [m])."""
    ids0 = [int(t) for t in prompt_ids]

    def compute():
        m = reference_model(model)
        cache = m.new_cache()
        lg = m.forward(ids0, cache, "last")[-1]
        out, tids, tlog, scale = [], [], [], []
        for _ in range(n):
            order = np.argsort(-lg, kind="stable")[:top_k]
            t = int(order[0])
            out.append(t)
            tids.append(order)
            tlog.append(lg[order])
            scale.append(np.abs(lg).max())
            if t == m.cfg.eos_id:
                break
            lg = m.forward([t], cache, "last")[-1]
        return {"ids": np.array(out, dtype=np.int64), "top_ids": np.array(tids),
                "top_logits": np.array(tlog), "row_scale": np.array(scale)}

    return _cached("greedy", model, {"prompt": ids0, "n": n, "top_k": top_k}, compute)


# ----------------------------------------------------------------------------------------------
# Comparisons
# ----------------------------------------------------------------------------------------------

# Tolerances of the synthetic-model tests (justified in test_synthetic.py's docstring; checked
# against the reference's activation-rounding emulation by tests/reference/test_reference.py).
F32_TOL = 1e-4
QUANT_TOL = {"row_rel_max": 0.12, "row_rel_mean": 0.06, "top1": 0.80, "top1_gap": 0.06}
BF16_TOL = {"row_rel_max": 0.04, "row_rel_mean": 0.02, "top1": 0.90, "top1_gap": 0.02}


def within(m: dict, tol: dict) -> bool:
    """Whether compare_logits metrics m meet a loose tolerance dict."""
    return (m["row_rel_max"] <= tol["row_rel_max"] and m["row_rel_mean"] <= tol["row_rel_mean"]
            and m["top1"] >= tol["top1"] and m["top1_gap"] <= tol["top1_gap"])


def compare_logits(got: np.ndarray, ref: np.ndarray) -> dict:
    """Metrics of got vs ref (both [rows, vocab]):
    max_rel   = max |got - ref| / max |ref|                (over the whole matrix)
    row_rel   = ||got_i - ref_i||_2 / ||ref_i||_2          (per row; reported max and mean)
    top1      = fraction of rows whose argmax agrees
    top1_gap  = max over rows of (max ref_i - ref_i[argmax got_i]) / max |ref_i|: how far below
                the reference's best the token triad ranks first can be (0 when top-1 agrees)."""
    assert got.shape == ref.shape, f"shape {got.shape} != reference {ref.shape}"
    assert np.all(np.isfinite(got)), "non-finite logits from triad"
    diff = got - ref
    row_rel = np.linalg.norm(diff, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-30)
    pick = got.argmax(axis=1)
    gap = (ref.max(axis=1) - ref[np.arange(ref.shape[0]), pick]) / \
        np.maximum(np.abs(ref).max(axis=1), 1e-30)
    return {
        "max_rel": float(np.abs(diff).max() / max(np.abs(ref).max(), 1e-30)),
        "row_rel_max": float(row_rel.max()),
        "row_rel_mean": float(row_rel.mean()),
        "worst_row": int(row_rel.argmax()),
        "top1": float(np.mean(pick == ref.argmax(axis=1))),
        "top1_gap": float(gap.max()),
    }


def describe(m: dict) -> str:
    return (f"max|d|/max|ref| = {m['max_rel']:.3e}, row rel-L2 max {m['row_rel_max']:.3e} "
            f"(row {m['worst_row']}) mean {m['row_rel_mean']:.3e}, top-1 agreement "
            f"{m['top1']:.3f} (worst top-1 gap {m['top1_gap']:.3e})")


def check_greedy_path(got_ids, ref: dict, rel_tol: float, eog_ids=()) -> str:
    """Checks triad's greedy ids against the reference's greedy path.

    Where both agree nothing is needed. At the first step where they differ (if any), triad's
    token must be a near-tie on the reference's row: ref_max - ref_logit[tok] <=
    rel_tol * max|ref row| (same prefix, so the reference row there is the right one); later
    steps are not checked (the paths have split). If triad stops early, its last token must be
    an end-of-generation id or the reference must also have stopped. Returns a summary."""
    rid = [int(t) for t in ref["ids"]]
    got = [int(t) for t in got_ids]
    for i, t in enumerate(got):
        if i >= len(rid):
            assert rid and rid[-1] in eog_ids, \
                f"triad generated more tokens ({len(got)}) than the reference ({len(rid)})"
            return f"agree on all {len(rid)} reference tokens"
        if t == rid[i]:
            continue
        top_ids = [int(x) for x in ref["top_ids"][i]]
        top_log = ref["top_logits"][i]
        tol = rel_tol * float(ref["row_scale"][i])
        assert t in top_ids, (f"step {i}: triad chose {t}, not among the reference's top "
                              f"{len(top_ids)} {top_ids[:8]}...; reference path {rid}, "
                              f"triad {got}")
        gap = float(top_log[0] - top_log[top_ids.index(t)])
        assert gap <= tol, (f"step {i}: triad chose {t} whose reference logit is {gap:.4g} "
                            f"below the best ({rid[i]}), tolerance {tol:.4g}; reference path "
                            f"{rid}, triad {got}")
        return f"agree on {i} tokens, then a near-tie (gap {gap:.3g} <= {tol:.3g})"
    if len(got) < len(rid):
        assert (got and got[-1] in eog_ids) or rid[len(got)] in eog_ids, \
            f"triad stopped after {len(got)} tokens, reference continues: {rid} vs {got}"
    return f"agree on all {len(got)} tokens"

"""Self-tests of the numpy reference (ref_model.py), its tokenizer helper, the K-quant encoders
and the synthetic model generator, independent of the C++ engine.

  * RoPE, attention (causal, sliding window, GQA head mapping), RMSNorm and activations on
    tiny hand-computed cases.
  * The reference's KV-cache path (chunked forward) equals its one-call forward.
  * K-quant encoders round-trip through gguf.quants.dequantize with the error of their step.
  * make_synthetic.py is deterministic and its files load with the intended configuration.
  * The golden tolerances for quantized models hold for an engine that rounds activations as
    documented (the reference's act_quant emulation vs the exact reference).
Checks against real data (tokenizer vectors, stories260K) are in test_reference_data.py.
Thread-safety: pytest tests, one process.
"""
import dataclasses
import filecmp
import math
import os
import sys

# Multi-threaded OpenBLAS is many times slower than one thread for these small products on a
# busy 2-core machine; must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
sys.dont_write_bytecode = True

import kquants  # noqa: E402
import make_synthetic  # noqa: E402
import ref_model as rm  # noqa: E402
from spm_tokenizer import SpmTokenizer  # noqa: E402


# -- building blocks --------------------------------------------------------------------------

def test_rope_normal_pairs():
    p, base = 3.0, 100.0
    x = np.zeros((1, 1, 4))
    x[0, 0, 0] = 1.0
    y = rm.rope(x, np.array([p]), 4, base, "normal")[0, 0]
    np.testing.assert_allclose(y, [math.cos(p), math.sin(p), 0, 0], atol=1e-15)
    x = np.zeros((1, 1, 4))
    x[0, 0, 3] = 1.0                     # second of pair (2, 3), angle p * base^(-2/4)
    a = p * base ** -0.5
    y = rm.rope(x, np.array([p]), 4, base, "normal")[0, 0]
    np.testing.assert_allclose(y, [0, 0, -math.sin(a), math.cos(a)], atol=1e-15)


def test_rope_neox_pairs_and_partial():
    p, base = 2.0, 10000.0
    x = np.zeros((1, 1, 8))
    x[0, 0, 1] = 1.0                     # rot 4: pairs (0,2), (1,3); dims 4..7 untouched
    x[0, 0, 6] = 5.0
    a = p * base ** -0.5
    y = rm.rope(x, np.array([p]), 4, base, "neox")[0, 0]
    np.testing.assert_allclose(y, [0, math.cos(a), 0, math.sin(a), 0, 0, 5.0, 0], atol=1e-15)
    y2 = rm.rope(x, np.array([2 * p]), 4, base, "neox", linear_factor=2.0)[0, 0]
    np.testing.assert_allclose(y2, y, atol=1e-15)


def test_rope_relative_position():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 16))
    k = rng.standard_normal((1, 1, 16))
    for layout in ("normal", "neox"):
        def dot(m, n):
            return float(np.sum(rm.rope(q, np.array([m]), 16, 500.0, layout) *
                                rm.rope(k, np.array([n]), 16, 500.0, layout)))
        assert dot(7, 3) == pytest.approx(dot(14, 10), abs=1e-12)
        assert dot(7, 3) != pytest.approx(dot(7, 4), abs=1e-6)


def test_attention_hand_case():
    q = np.array([[[1.0, 0.0]], [[1.0, 0.0]]])              # 2 queries, 1 head, dim 2
    k = np.array([[[2.0, 0.0]], [[0.0, 0.0]]])
    v = np.array([[[1.0, 10.0]], [[3.0, 20.0]]])
    out = rm.attention(q, k, v, np.array([0, 1]), np.array([0, 1]), 1.0)
    np.testing.assert_allclose(out[0, 0], v[0, 0])            # causal: sees key 0 only
    w0 = math.exp(2.0) / (math.exp(2.0) + 1.0)                # scores 2 and 0
    np.testing.assert_allclose(out[1, 0], w0 * v[0, 0] + (1 - w0) * v[1, 0])
    win = rm.attention(q, k, v, np.array([0, 1]), np.array([0, 1]), 1.0, window=1)
    np.testing.assert_allclose(win[1, 0], v[1, 0])            # window 1: only itself


def test_attention_gqa_mapping():
    n_kv, group, s = 2, 3, 4
    q = np.zeros((1, n_kv * group, 2))
    k = np.zeros((s, n_kv, 2))
    v = np.zeros((s, n_kv, 1))
    v[:, 0, 0] = 1.0
    v[:, 1, 0] = 2.0
    out = rm.attention(q, k, v, np.array([3]), np.arange(s), 1.0)
    np.testing.assert_allclose(out[0, :, 0], [1, 1, 1, 2, 2, 2])


def test_norm_and_activations():
    np.testing.assert_allclose(rm.rms_norm(np.array([3.0, 4.0]), np.array([1.0, 2.0]), 0.0),
                               [3 / math.sqrt(12.5), 8 / math.sqrt(12.5)])
    assert rm.silu(np.array([0.0]))[0] == 0.0
    assert rm.silu(np.array([2.0]))[0] == pytest.approx(2.0 / (1 + math.exp(-2.0)))
    assert rm.gelu_tanh(np.array([1.0]))[0] == pytest.approx(0.8411919906, abs=1e-9)


def test_activation_rounding():
    x = np.array([[1.0, -0.5, 0.25] + [0.0] * 29])
    y = rm.quantize_activations_q8(x)
    d = np.float32(1.0) / np.float32(127)
    np.testing.assert_allclose(y[0, :3], [127 * d, -64 * d, 32 * d], rtol=1e-7)  # 63.5 -> 64
    assert rm.round_activations_bf16(np.array([1.0 + 2 ** -9]))[0] == 1.0
    assert rm.round_activations_bf16(np.array([1.0 + 3 * 2 ** -9]))[0] == 1.0 + 2 ** -7


# -- synthetic models ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("synth"))
    make_synthetic.write_all(d)
    return d


def test_generator_deterministic(synth, tmp_path):
    again = make_synthetic.write_all(str(tmp_path))
    for p in again:
        assert filecmp.cmp(p, os.path.join(synth, os.path.basename(p)), shallow=False), p


def test_synthetic_configs(synth):
    g = rm.RefModel(os.path.join(synth, "gemma3.gguf")).cfg
    assert g.local_layers == (True, True, True, True, True, False, True)
    assert (g.sliding_window, g.head_dim, g.n_head, g.n_head_kv) == (10, 32, 8, 2)
    assert g.rope_base == 1e6 and g.rope_base_local == 10000.0
    r = rm.RefModel(os.path.join(synth, "llama_rope.gguf")).cfg
    assert (r.rope_dims, r.rope_linear_factor, r.rope_base) == (16, 4.0, 50000.0)
    q3 = rm.RefModel(os.path.join(synth, "qwen3.gguf"))
    assert q3.cfg.head_dim * q3.cfg.n_head != q3.cfg.n_embd and q3.cfg.rope_layout == "neox"
    sw = rm.RefModel(os.path.join(synth, "llama_swa.gguf"))
    assert sw.output_matrix_name() == "token_embd.weight" and sw.cfg.sliding_window == 12
    assert "attn_q.bias" in " ".join(rm.RefModel(os.path.join(synth, "qwen2.gguf")).w)
    types = set(rm.RefModel(os.path.join(synth, "gemma3_q4_k_m.gguf")).tensor_types.values())
    assert types == {"F32", "Q8_0", "Q5_0", "Q4_K", "Q6_K"}


def test_synthetic_tokenizer(synth):
    tok = SpmTokenizer(os.path.join(synth, "llama.gguf"))
    text = "Once upon a time, there was a little girl. Zebra 42!"
    ids = tok.encode(text)
    assert ids[0] == 1 and tok.decode(ids).strip() == text
    assert len(tok.tokens) == make_synthetic.N_VOCAB


def test_reference_cache_path(synth):
    m = rm.RefModel(os.path.join(synth, "gemma3.gguf"))
    rng = np.random.default_rng(3)
    toks = [1] + [int(t) for t in rng.integers(3, 500, 29)]
    full = m.logits(toks)
    cache = m.new_cache()
    parts = [m.forward(toks[i:i + 7], cache) for i in range(0, len(toks), 7)]
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=0, atol=1e-10)
    # The window matters: without it the last rows change.
    nowin = rm.RefModel(os.path.join(synth, "gemma3.gguf"))
    nowin.cfg = dataclasses.replace(nowin.cfg, sliding_window=0)
    assert np.abs(nowin.logits(toks)[-1] - full[-1]).max() > 1e-3


@pytest.mark.parametrize("name", ["llama_q8_0", "llama_q4_0", "llama_q4_1", "llama_q5_0",
                                  "llama_q5_1", "llama_q4_k", "llama_q5_k", "llama_q6_k",
                                  "gemma3_q4_k_m", "llama_bf16"])
def test_golden_tolerances_admit_activation_rounding(synth, name):
    import golden_util as gu
    import test_synthetic as ts
    path = os.path.join(synth, name + ".gguf")
    exact = rm.RefModel(path).logits(ts.sequence())
    emul = rm.RefModel(path, act_quant=True).logits(ts.sequence())
    m = gu.compare_logits(emul, exact)
    tol = gu.BF16_TOL if name.endswith("bf16") else gu.QUANT_TOL
    assert gu.within(m, tol), f"{name}: {gu.describe(m)} vs {tol}"


# -- K-quant encoders ---------------------------------------------------------------------------

@pytest.mark.parametrize("enc,qt,rel", [(kquants.quantize_q4_k, QT.Q4_K, 0.08),
                                        (kquants.quantize_q5_k, QT.Q5_K, 0.04),
                                        (kquants.quantize_q6_k, QT.Q6_K, 0.025)])
def test_kquant_roundtrip(enc, qt, rel):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 512)) * 0.1).astype(np.float32)
    x[0, :256] = np.abs(x[0, :256]) + 0.2          # all-positive block (min 0)
    x[1, :] = 0.0                                  # all-zero row
    y = dequantize(enc(x), qt)
    assert y.shape == x.shape and np.all(y[1] == 0)
    err = np.sqrt(np.mean((y - x) ** 2)) / np.sqrt(np.mean(x ** 2))
    assert err < rel
    # Monotone: a larger input never decodes to a smaller value within a sub-block.
    xs = np.sort(x[2:3], axis=1)
    ys = dequantize(enc(xs), qt)
    assert np.all(np.diff(ys.reshape(-1, 16), axis=1) >= -1e-6)

"""`triad quantize` against PyPI gguf (an independent implementation of GGML's formats):

  * For the types gguf.quants can quantize (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, BF16, F16), our
    blocks equal its blocks bit for bit, on Gaussian rows plus zero, constant, one-hot and
    wide-range rows.
  * For every type we write, gguf.quants' dequantization of our blocks is within the type's
    error bound of the input (so the bytes mean what GGML says they mean), and the file reads
    back with gguf's own reader (types, shapes, metadata).
  * The mix's per-tensor types on a llama-shaped file, an override equal to the base type.
  * Bad requests (unknown type, truncated input, requantizing without the flag, an override
    type that cannot hold the rows) exit 1 with a clear message and leave no output file.
  * stories260K (real F32 weights) quantized to Q8_0 / Q4_K_M runs, with perplexity close to
    the F32 model's.
"""
import os
import re
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402

TRIAD = os.environ.get("TRIAD_BIN", "build/apps/triad/triad")
COLS = 512


def run(*args, ok=True):
    p = subprocess.run([TRIAD, *map(str, args)], capture_output=True, text=True, timeout=300)
    if ok:
        assert p.returncode == 0, p.stderr[-3000:]
    return p


def rows(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((12, COLS)).astype(np.float32)
    x[1] = 0.0
    x[2] = 0.37
    x[3] = 0.0
    x[3, 5] = -2.5
    x[4] *= np.exp2(rng.uniform(-8, 8, COLS)).astype(np.float32)  # wide dynamic range
    x[5] = np.round(x[5] * 4) / 4  # values on a coarse grid (ties in the rounding)
    return x


def write_model(path, tensors, arch="llama", n_layer=1):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(n_layer)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    for name, data in tensors.items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read(path):
    r = gguf.GGUFReader(str(path))
    return r, {t.name: t for t in r.tensors}


@pytest.fixture(scope="module")
def f32_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("quant")
    p = d / "in.gguf"
    write_model(p, {"blk.0.ffn_up.weight": rows()})
    return p


EXACT = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "MXFP4", "BF16", "F16"]
MIX = {"MXFP4": "MXFP4_MOE"}  # the mix whose base type it is (with --pure: every tensor)


@pytest.mark.parametrize("name", EXACT)
def test_blocks_equal_gguf_quants(f32_model, tmp_path, name):
    out = tmp_path / f"{name}.gguf"
    run("quantize", "--pure", f32_model, out, MIX.get(name, name))
    _, ts = read(out)
    t = ts["blk.0.ffn_up.weight"]
    assert t.tensor_type == T[name]
    want = gguf.quants.quantize(rows(), T[name])
    got = np.asarray(t.data).reshape(want.shape)
    assert got.dtype == want.dtype
    mism = np.argwhere(got.view(np.uint8) != want.view(np.uint8))
    assert len(mism) == 0, f"{name}: {len(mism)} bytes differ, first at {mism[:3].tolist()}"


# Relative RMS error bounds on the Gaussian rows (measured by tests/unit/quant_test.cpp, plus
# headroom for the special rows here).
BOUNDS = {"Q8_0": 0.006, "Q6_K": 0.021, "Q5_K": 0.042, "Q5_1": 0.045, "Q5_0": 0.05,
          "Q4_K": 0.083, "Q4_1": 0.09, "Q4_0": 0.1, "Q3_K": 0.175, "Q2_K": 0.345,
          "IQ4_NL": 0.087, "IQ4_XS": 0.088, "MXFP4": 0.132, "BF16": 0.003, "F16": 5e-4}


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_gguf_dequantizes_our_blocks_within_bound(f32_model, tmp_path, name):
    out = tmp_path / f"{name}.gguf"
    run("quantize", "--pure", f32_model, out, MIX.get(name, name))
    _, ts = read(out)
    t = ts["blk.0.ffn_up.weight"]
    assert t.tensor_type == T[name]
    y = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1, COLS)
    x = rows()
    gauss = [0, 6, 7, 8, 9, 10, 11]
    err = np.sqrt(((x[gauss] - y[gauss]) ** 2).sum() / (x[gauss] ** 2).sum())
    assert err <= BOUNDS[name], f"{name}: rel. RMS error {err:.5f} > {BOUNDS[name]}"
    assert np.all(y[1] == 0) and np.all(np.isfinite(y))
    # The constant and one-hot rows come back close.
    assert np.allclose(y[2], 0.37, rtol=0.03), name
    assert abs(y[3, 5] + 2.5) <= 2.5 * 0.2 and np.abs(np.delete(y[3], 5)).max() < 0.1, name


def llama_tensors(n_layer=8, cols=256, seed=2):
    rng = np.random.default_rng(seed)
    t = {"token_embd.weight": rng.standard_normal((64, cols), dtype=np.float32),
         "output.weight": rng.standard_normal((64, cols), dtype=np.float32),
         "output_norm.weight": np.ones(cols, dtype=np.float32)}
    for i in range(n_layer):
        for n, shape in [("attn_q", (cols, cols)), ("attn_k", (cols, cols)), ("attn_v", (cols, cols)),
                         ("attn_output", (cols, cols)), ("ffn_up", (512, cols)), ("ffn_down", (cols, 512))]:
            t[f"blk.{i}.{n}.weight"] = rng.standard_normal(shape, dtype=np.float32) * 0.1
        t[f"blk.{i}.attn_norm.weight"] = np.ones(cols, dtype=np.float32)
    return t


def test_mix_types_and_overrides(tmp_path):
    src = tmp_path / "llama.gguf"
    write_model(src, llama_tensors(), n_layer=8)
    out = tmp_path / "q4km.gguf"
    p = run("quantize", src, out, "q4_k_m")
    assert "rel.err" in p.stderr and "wrote" in p.stdout
    r, ts = read(out)
    types = {n: t.tensor_type.name for n, t in ts.items()}
    assert types["output.weight"] == "Q6_K" and types["blk.3.attn_q.weight"] == "Q4_K"
    assert types["blk.0.attn_norm.weight"] == "F32"
    # use_more_bits(i, 8): i < 1, i >= 7, (i - 1) % 3 == 2
    for i in range(8):
        more = i < 1 or i >= 7 or (i - 1) % 3 == 2
        want = "Q6_K" if more else "Q4_K"
        assert types[f"blk.{i}.attn_v.weight"] == want and types[f"blk.{i}.ffn_down.weight"] == want, i
    assert int(r.fields["general.file_type"].parts[-1][0]) == 15
    # An override equal to the mix's base type is honoured.
    out2 = tmp_path / "q4km_o.gguf"
    run("quantize", "--tensor-type", "ffn_down=q4_k", "--output-tensor-type", "q8_0", src, out2, "Q4_K_M")
    _, ts2 = read(out2)
    assert all(ts2[f"blk.{i}.ffn_down.weight"].tensor_type.name == "Q4_K" for i in range(8))
    assert ts2["output.weight"].tensor_type.name == "Q8_0"
    assert ts2["blk.0.attn_v.weight"].tensor_type.name == "Q6_K"


def no_output(path):
    return not os.path.exists(path) and not os.path.exists(str(path) + ".tmp")


def test_bad_requests_are_clear_errors_and_leave_nothing(f32_model, tmp_path):
    out = tmp_path / "o.gguf"
    p = run("quantize", f32_model, out, "Q4_K_XL", ok=False)
    assert p.returncode == 1 and "unknown quantization type 'Q4_K_XL'" in p.stderr and "Q4_K_M" in p.stderr
    assert no_output(out)
    cut = tmp_path / "cut.gguf"
    data = open(f32_model, "rb").read()
    open(cut, "wb").write(data[: len(data) - 777])
    p = run("quantize", cut, out, "Q4_0", ok=False)
    assert p.returncode == 1 and "triad: error:" in p.stderr
    assert no_output(out)
    q8 = tmp_path / "q8.gguf"
    run("quantize", f32_model, q8, "Q8_0")
    p = run("quantize", q8, out, "Q4_K_M", ok=False)
    assert p.returncode == 1 and "--allow-requantize" in p.stderr
    assert no_output(out)
    odd = tmp_path / "odd.gguf"
    write_model(odd, {"blk.0.ffn_up.weight": np.ones((4, 96), dtype=np.float32)})
    p = run("quantize", "--tensor-type", "ffn_up=q6_k", odd, out, "Q4_K_M", ok=False)
    assert p.returncode == 1 and "cannot hold" in p.stderr
    assert no_output(out)
    p = run("quantize", "--tensor-type", "ffn_up", f32_model, out, "Q4_0", ok=False)
    assert p.returncode == 1 and "REGEX=TYPE" in p.stderr
    assert no_output(out)


def ppl(model, text):
    p = run("perplexity", "-m", model, "-f", text, "--ctx", "128", "--chunks", "8")
    return float(re.search(r"perplexity: ([0-9.]+)", p.stdout).group(1))


def test_stories_quantized_models_run(stories, tmp_path):
    src = stories
    text = tmp_path / "story.txt"
    story = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
             "sun with her red ball. One day, her mom said, \"Lily, let's go to the park!\" ")
    text.write_text(story * 40)
    base = ppl(src, text)
    for name, tol in [("Q8_0", 0.01), ("Q4_K_M", 0.06)]:
        out = tmp_path / f"s-{name}.gguf"
        run("quantize", src, out, name)
        got = ppl(out, text)
        assert abs(got / base - 1) < tol, f"{name}: perplexity {got} vs F32 {base}"

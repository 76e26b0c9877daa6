"""`triad imatrix` against an independent numpy computation on stories260K (real F32 weights):
the reference forward pass (tests/reference/ref_model.py) is run over the same chunks, every
input of every block matrix product is squared and summed per channel in float64, and the
file's in_sum2 must equal those sums within 1e-4 relative (float32 activations against
float64), its counts exactly. The file is llama.cpp's imatrix GGUF: it is read here with PyPI
gguf's reader, and `triad quantize --imatrix` accepts it.
"""

import numpy as np
import pytest

import golden_util as gu
from test_stories import LONG_STORY

gguf = pytest.importorskip("gguf")


def test_imatrix_equals_numpy_sums(stories, tmp_path):
    gu.require("imatrix")
    n_ctx, n_chunks = 64, 3
    stream = gu.tokenize(stories, LONG_STORY)
    assert len(stream) >= n_ctx * n_chunks
    text = tmp_path / "calib.txt"
    text.write_text(LONG_STORY, encoding="utf-8")
    out = tmp_path / "imatrix.gguf"
    gu.run_triad(["imatrix", "-m", stories, "-f", str(text), "--ctx", n_ctx, "--chunks", n_chunks,
                  "-o", str(out), "--threads", gu.DEFAULT_THREADS])

    ref = gu.reference_model(stories)
    sums, counts = {}, {}
    linear = ref._linear

    def spy(x, name):
        if name.startswith("blk."):
            sums[name] = sums.get(name, 0.0) + (np.asarray(x, dtype=np.float64) ** 2).sum(axis=0)
            counts[name] = counts.get(name, 0) + x.shape[0]
        return linear(x, name)

    ref._linear = spy
    try:
        for k in range(n_chunks):
            ids = list(stream[k * n_ctx:(k + 1) * n_ctx])
            ids[0] = 1  # BOS, as triad imatrix (and llama-imatrix) start each chunk
            ref.forward(ids)
    finally:
        del ref._linear

    r = gguf.GGUFReader(str(out))
    assert r.fields["general.type"].contents() == "imatrix"
    assert int(r.fields["imatrix.chunk_count"].contents()) == n_chunks
    assert int(r.fields["imatrix.chunk_size"].contents()) == n_ctx
    got = {t.name: np.asarray(t.data, dtype=np.float64).reshape(-1) for t in r.tensors}
    names = {n[: -len(".in_sum2")] for n in got if n.endswith(".in_sum2")}
    assert names == set(sums), sorted(names ^ set(sums))
    worst = 0.0
    for n in names:
        assert got[n + ".counts"].tolist() == [counts[n]], n
        want = sums[n]
        rel = np.abs(got[n + ".in_sum2"] - want).max() / np.abs(want).max()
        worst = max(worst, rel)
        assert rel <= 1e-4, f"{n}: in_sum2 off by {rel:.2e} relative"
    print(f"imatrix: {len(names)} matrices, worst relative difference {worst:.2e}")

    q = tmp_path / "q.gguf"
    p = gu.run_triad(["quantize", "--imatrix", str(out), stories, str(q), "Q4_K_M"])
    assert b"imatrix" in p.stderr

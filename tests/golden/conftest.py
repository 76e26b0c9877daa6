"""pytest fixtures of the golden tests (tests/golden): the synthetic model folder and data paths.

The synthetic models are written by tests/reference/make_synthetic.py into a folder of the
reference cache named after a hash of the generator's source, so they are generated once and
regenerated whenever the generator changes. Thread-safety: pytest fixtures, one process.
"""
import os
import sys

# Multi-threaded OpenBLAS is many times slower than one thread for these small products on a
# busy 2-core machine; must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import golden_util  # noqa: E402
import make_synthetic  # noqa: E402  (golden_util put tests/reference on sys.path)


@pytest.fixture(scope="session")
def synthetic_dir():
    tag = golden_util._source_hash("make_synthetic.py", "kquants.py")[:16]
    d = os.path.join(golden_util.CACHE_DIR, f"synthetic-{tag}")
    names = [s.name for s in make_synthetic.SPECS] + \
        [f"llama_{t}" for t in make_synthetic.LLAMA_TYPES] + ["gemma3_q4_k_m", "qwen3moe_q5_0"]
    if not all(os.path.exists(os.path.join(d, n + ".gguf")) for n in names):
        make_synthetic.write_all(d)
    return d


@pytest.fixture(scope="session")
def testdata_dir():
    d = os.environ.get("TRIAD_TESTDATA", "")
    if not d or not os.path.isdir(d):
        pytest.skip(f"TRIAD_TESTDATA not set or missing ({d!r})")
    return d


@pytest.fixture(scope="session")
def stories(testdata_dir):
    """stories260K.gguf from the shared test data (a real, trained tiny llama with F32 weights)."""
    p = os.path.join(testdata_dir, "models", "stories260K.gguf")
    if not os.path.exists(p):
        pytest.skip(f"{p} missing")
    return p


@pytest.fixture(scope="session")
def models_dir():
    d = os.environ.get("TRIAD_MODELS_DIR", "")
    if not d or not os.path.isdir(d):
        pytest.skip(f"TRIAD_MODELS_DIR not set or missing ({d!r})")
    return d

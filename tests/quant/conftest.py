"""pytest fixtures of the quantization tests (tests/quant)."""
import os

import pytest


@pytest.fixture(scope="session")
def testdata_dir():
    d = os.environ.get("TRIAD_TESTDATA") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "testdata")
    if not os.path.isdir(d):
        pytest.skip(f"shared test data not found at {d}")
    return d


@pytest.fixture(scope="session")
def stories(testdata_dir):
    """stories260K.gguf from the shared test data (a real, trained tiny llama with F32 weights)."""
    p = os.path.join(testdata_dir, "models", "stories260K.gguf")
    if not os.path.exists(p):
        pytest.skip(f"{p} missing")
    return p

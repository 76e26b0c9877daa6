"""pytest fixtures of the quantization tests (tests/quant)."""
import os

import pytest


@pytest.fixture(scope="session")
def testdata_dir():
    d = os.environ.get("TRIAD_TESTDATA") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "testdata")
    if not os.path.isdir(d):
        pytest.skip(f"shared test data not found at {d}")
    return d

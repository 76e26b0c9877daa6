"""One memory plan for several models (issue 16): with --memory-budget the weights and every KV
cache fit in it together, the generative models' KV shares follow their KV bytes per token (the
same token capacity each), an embedding model gets just its one-step cache, /v1/models reports
each model's weights and KV bytes, and a budget the weights alone exceed is a clear error."""
from __future__ import annotations

import json
import subprocess
import urllib.request

from conftest import BIN, STORIES, TINY_LLAMA, Server, need

MIB = 1 << 20


def get(s: Server, path: str):
    return json.load(urllib.request.urlopen(s.base + path))


def test_budget_covers_weights_and_kv_caches():
    need(STORIES)
    need(TINY_LLAMA)
    s = Server(["-m", str(STORIES), "--alias", "stories", "-m", str(TINY_LLAMA), "--alias", "tiny",
                "--memory-budget", "200MiB"])
    try:
        models = {m["id"]: m for m in get(s, "/v1/models")["data"]}
        stats = {m["id"]: m for m in get(s, "/stats")["models"]}
    finally:
        assert s.stop() == 0
    total = sum(m["weights_bytes"] + m["kv_cache_bytes"] for m in models.values())
    assert 190 * MIB <= total <= 200 * MIB, total / MIB  # whole blocks: a little under the budget
    # Same token capacity: KV bytes in proportion to bytes per token.
    cap = {k: models[k]["kv_cache_bytes"] / stats[k]["kv_bytes_per_token"] for k in models}
    assert abs(cap["stories"] - cap["tiny"]) / cap["stories"] < 0.02, cap


def test_budget_below_the_weights_is_an_error():
    need(STORIES)
    p = subprocess.run([BIN, "serve", "-m", str(STORIES), "--memory-budget", "1MiB", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "leaves no room for KV caches" in p.stderr, p.stderr

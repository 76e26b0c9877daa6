"""Starts real `triad serve` processes on loopback for the OpenAI-SDK tests."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

BIN = os.environ.get("TRIAD_BIN")
TESTDATA = Path(os.environ.get("TRIAD_TESTDATA", Path(__file__).resolve().parents[3] / "shared" / "testdata"))
STORIES = TESTDATA / "models" / "stories260K.gguf"
TINY_LLAMA = TESTDATA / "models" / "llama-2-tiny-random.gguf"
MODELS_DIR = Path(os.environ.get("TRIAD_MODELS_DIR", Path(__file__).resolve().parents[2] / "models"))
GEMMA = MODELS_DIR / "gemma-3-270m-q4_k_m.gguf"


class Server:
    def __init__(self, args: list[str], env: dict | None = None):
        if not BIN:
            pytest.skip("TRIAD_BIN is not set")
        self.proc = subprocess.Popen([BIN, "serve", "--port", "0", "--threads", "1", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})
        self.log: list[str] = []
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"serving .* on http://[^:]+:(\d+)/v1", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("triad serve did not start:\n" + "".join(self.log))
        self.base = f"http://127.0.0.1:{self.port}"
        self.base_url = self.base + "/v1"
        # The server logs a line per request: keep reading, so the pipe never fills (a test may
        # pause the reader to play a stuck log driver).
        self._go = threading.Event()
        self._go.set()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self):
        while True:
            self._go.wait()
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)

    def _pause_drain(self):
        self._go.clear()

    def _resume_drain(self):
        self._go.set()

    def stop(self, sig=signal.SIGTERM, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._go.set()
        self._reader.join(timeout=10)
        return self.proc.returncode


def need(path: Path):
    if not path.exists():
        pytest.skip(f"model missing: {path}")


@pytest.fixture(scope="session")
def server():
    """stories260K as 'stories' and the tiny random Llama 2 as 'tiny' in one process."""
    need(STORIES)
    need(TINY_LLAMA)
    s = Server(["-m", str(STORIES), "--alias", "stories", "-m", str(TINY_LLAMA), "--alias", "tiny",
                "--max-body", "1MiB", "--kv-cache-memory", "256MiB"])
    yield s
    rc = s.stop()
    assert rc == 0, "".join(s.log[-30:])


@pytest.fixture(scope="session")
def gemma_server():
    need(GEMMA)
    s = Server(["-m", str(GEMMA), "--alias", "gemma", "--ctx", "2048"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])

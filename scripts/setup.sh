#!/usr/bin/env bash
# Installs every build and test dependency on a fresh Debian 12 machine (apt and pip).
# Idempotent: a second run only checks.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev            # libFuzzer + sanitizers for the fuzz target
  googletest libgtest-dev libbenchmark-dev
  libpcre2-dev nlohmann-json3-dev libcli11-dev
  libssl-dev                          # SHA-256 for prefix-cache block hashes
  libboost-dev                        # Boost.Beast / Asio (header-only) for the HTTP server
  python3 python3-pip unzip
  r-base-core r-cran-janeaustenr      # public-domain text (Pride and Prejudice) for perplexity
  chromium                            # headless rendering check of the tradeoff report (tests/quant/render_check.py)
  chromium-driver                     # selenium drives the chat page and dashboard (tests/server/test_browser.py)
)
# ml_dtypes: FP8 rounding reference; lm-eval[api]: scores a local task through /v1/completions;
# selenium: drives Debian's chromium through chromium-driver (no browser download);
# sentencepiece: trains a Unigram model, the reference for the converted "t5" tokenizer
PIP_PACKAGES=(gguf numpy pytest jinja2 jsonschema openai ml_dtypes "lm-eval[api]==0.4.13" safetensors tokenizers selenium sentencepiece)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing apt packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c "import gguf, numpy, pytest, jinja2, jsonschema, openai, ml_dtypes, lm_eval, tenacity, safetensors, tokenizers, selenium, sentencepiece" 2>/dev/null; then
  echo "setup: installing pip packages: ${PIP_PACKAGES[*]}"
  "$PY" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" \
    || "$PY" -m pip install -q --disable-pip-version-check --break-system-packages "${PIP_PACKAGES[@]}"
fi
echo "setup: dependencies ready"

#!/usr/bin/env bash
# Fetches the tokenizer vocabularies whose test vectors are in ../shared/testdata/tokenizer but
# whose .gguf files are not (qwen2, qwen35, llama-bpe, command-r, gemma-4: 4 MiB or larger).
# They ship, byte-identical to llama.cpp's models/ folder, in the source distribution of PyPI's
# llama-cpp-python 0.3.36 (llama.cpp vendored). Extracted into .cache/vocab/ (git-ignored);
# the sdist is cached in .cache/pip-vocab/. Failure to fetch is not fatal: the tests skip.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=.cache/vocab
CACHE=.cache/pip-vocab
VOCABS=(qwen2 qwen35 llama-bpe command-r gemma-4)
have=1
for v in "${VOCABS[@]}"; do [ -s "$OUT/ggml-vocab-$v.gguf" ] || have=0; done
if [ $have = 1 ]; then echo "vocabs: ready in $OUT"; exit 0; fi
mkdir -p "$OUT" "$CACHE"
SDIST="$CACHE/llama_cpp_python-0.3.36.tar.gz"
if [ ! -s "$SDIST" ]; then
  echo "vocabs: downloading llama-cpp-python 0.3.36 source (about 75 MB) for its vocab files ..."
  "$PY" -m pip download --no-deps --no-binary :all: -q --disable-pip-version-check \
    llama-cpp-python==0.3.36 -d "$CACHE" || { echo "vocabs: download failed; those tokenizer tests will skip"; exit 0; }
fi
members=()
for v in "${VOCABS[@]}"; do members+=("llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-$v.gguf"); done
tar -xzf "$SDIST" -C "$OUT" --strip-components=4 "${members[@]}" || { echo "vocabs: extraction failed; those tokenizer tests will skip"; exit 0; }
echo "vocabs: ${VOCABS[*]} ready in $OUT"

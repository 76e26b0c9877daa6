#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, models, a Release build with tests,
# ctest (unit, kernel, golden and fuzz-corpus replay tests), an ASan/UBSan build of the tests,
# and bounded libFuzzer runs of every parser of untrusted bytes under ASan/UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch_models.sh --all  # Qwen2.5-Coder-0.5B-Instruct (the default model) and Gemma 3 270M
scripts/fetch_vocabs.sh
export TRIAD_TESTDATA=${TRIAD_TESTDATA:-$(cd .. && pwd)/shared/testdata}
[ -d "$TRIAD_TESTDATA" ] || echo "test: warning: shared test data not found at $TRIAD_TESTDATA; tests that need it will skip"

echo "== release build and tests"
BUILD_DIR=build scripts/build.sh -DTRIAD_TESTDATA="$TRIAD_TESTDATA"
(cd build && ctest --output-on-failure -j"$(nproc)")

echo "== sanitizer build (ASan + UBSan) of the C++ tests"
BUILD_DIR=build-asan scripts/build.sh -DTRIAD_SANITIZE=ON -DTRIAD_TESTDATA="$TRIAD_TESTDATA"
(cd build-asan && ctest --output-on-failure -j"$(nproc)" -L cpp)
echo "== the server (openai SDK) and template tests against the sanitizer build"
(cd build-asan && ctest --output-on-failure -R "server_openai|templates_jinja2")

# The GGUF reader gets about a minute (issue #2); the other parsers 30 s each.
echo "== fuzzing the GGUF parser (${TRIAD_FUZZ_SECONDS_GGUF:-60} s)"
scripts/fuzz.sh "${TRIAD_FUZZ_SECONDS_GGUF:-60}" gguf
echo "== fuzzing the template engine, the request parser, grammars, schemas, tool-call output, imatrix and safetensors files, tokenizers (${TRIAD_FUZZ_SECONDS:-30} s each)"
scripts/fuzz.sh "${TRIAD_FUZZ_SECONDS:-30}" template request grammar schema tool imatrix safetensors tokenizer
echo "test: all passed"

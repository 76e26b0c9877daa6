#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, models, a Release build with tests,
# ctest (unit, kernel, golden and fuzz-corpus replay tests), an ASan/UBSan build of the tests,
# and a bounded libFuzzer run of the GGUF parser under ASan/UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch_models.sh
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

echo "== fuzzing the GGUF parser, the template engine and the request parser (${TRIAD_FUZZ_SECONDS:-40} s each)"
scripts/fuzz.sh "${TRIAD_FUZZ_SECONDS:-40}"
echo "test: all passed"

#!/usr/bin/env bash
# Fuzzes the GGUF reader: builds tests/fuzz/gguf_fuzz with clang, libFuzzer, ASan and UBSan in
# build-fuzz/ (TRIAD_BUILD_FUZZ=ON, tests off, Release) and runs it for SECONDS (default 60).
#
# usage: scripts/fuzz.sh [SECONDS]     env: CC/CXX (default clang/clang++, else clang-14),
#                                           TRIAD_FUZZ_BUILD (default <repo>/build-fuzz)
# The fuzzer works on a copy of tests/fuzz/corpus/gguf in the build folder (the checked-in
# corpus is never written to; the copy keeps growing across runs). Crash inputs land in
# <build>/fuzz-gguf/artifacts/; minimize one with
#   <build>/tests/fuzz/gguf_fuzz -minimize_crash=1 -runs=10000 ARTIFACT
# and add it to tests/fuzz/corpus/gguf/ as a regression (gguf_fuzz_replay runs it in ctest).
# Exit status: 0 when the run finished without a finding, non-zero on a crash, leak, timeout
# (-timeout=10 s per input) or memory blow-up (-rss_limit_mb=2048), or a build failure.
set -euo pipefail

RUN_SECONDS="${1:-60}"
if ! [[ "$RUN_SECONDS" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TRIAD_FUZZ_BUILD:-$ROOT/build-fuzz}"

pick() {  # first compiler that exists
  for c in "$@"; do
    if command -v "$c" > /dev/null 2>&1; then echo "$c"; return; fi
  done
  echo "no clang found (tried: $*)" >&2
  exit 2
}
CC="${CC:-$(pick clang clang-14)}"
CXX="${CXX:-$(pick clang++ clang++-14)}"

mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DTRIAD_BUILD_FUZZ=ON -DTRIAD_BUILD_TESTS=OFF > "$BUILD/configure.log" 2>&1 || {
  cat "$BUILD/configure.log" >&2
  exit 1
}
cmake --build "$BUILD" --target gguf_fuzz -j "$(nproc)"

WORK="$BUILD/fuzz-gguf"
mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp -n "$ROOT"/tests/fuzz/corpus/gguf/* "$WORK/corpus/"  # refresh seeds, keep what was found

set +e
"$BUILD/tests/fuzz/gguf_fuzz" \
  -max_total_time="$RUN_SECONDS" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
  -dict="$ROOT/tests/fuzz/gguf.dict" -artifact_prefix="$WORK/artifacts/" \
  -print_final_stats=1 "$WORK/corpus"
status=$?
set -e
if [[ $status -ne 0 ]]; then
  echo "gguf_fuzz failed (exit $status); inputs in $WORK/artifacts/:" >&2
  ls -l "$WORK/artifacts/" >&2
  exit "$status"
fi
echo "gguf_fuzz: no findings in ${RUN_SECONDS}s; corpus copy: $WORK/corpus ($(ls "$WORK/corpus" | wc -l) inputs)"

#!/usr/bin/env bash
# Fuzzes the parsers of untrusted bytes: builds the libFuzzer targets tests/fuzz/gguf_fuzz (GGUF
# reader), tests/fuzz/template_fuzz (chat-template engine) and tests/fuzz/request_fuzz (the
# server's request parsing) and tests/fuzz/grammar_fuzz (GBNF grammars and token masks), tests/fuzz/schema_fuzz (the JSON Schema
# compiler), tests/fuzz/tool_fuzz (the tool-call output parser) and tests/fuzz/imatrix_fuzz
# (imatrix files), tests/fuzz/safetensors_fuzz (safetensors checkpoints) and tests/fuzz/tokenizer_fuzz
# (tokenizers over GGUF vocabularies, Unigram charsmaps included) with clang, ASan and UBSan in
# build-fuzz/ (TRIAD_BUILD_FUZZ=ON, tests off, Release) and runs each for SECONDS (default 60).
#
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]   targets: gguf template request grammar schema tool imatrix safetensors tokenizer (default: all)
#        env: CC/CXX (default clang/clang++, else clang-14), TRIAD_FUZZ_BUILD (default
#             <repo>/build-fuzz), TRIAD_TESTDATA (extra template seeds from its templates/)
# Each fuzzer works on a copy of tests/fuzz/corpus/TARGET in the build folder (the checked-in
# corpus is never written to; the copy keeps growing across runs). Crash inputs land in
# <build>/fuzz-TARGET/artifacts/; minimize one with
#   <build>/tests/fuzz/TARGET_fuzz -minimize_crash=1 -runs=10000 ARTIFACT
# and add it to tests/fuzz/corpus/TARGET/ as a regression (TARGET_fuzz_replay runs it in ctest).
# Exit status: 0 when the run finished without a finding, non-zero on a crash, leak, timeout
# (-timeout=10 s per input) or memory blow-up (-rss_limit_mb=2048), or a build failure.
set -euo pipefail

RUN_SECONDS="${1:-60}"
if ! [[ "$RUN_SECONDS" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS] [gguf|template ...]" >&2
  exit 2
fi
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(gguf template request grammar schema tool imatrix safetensors tokenizer)
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
for t in "${TARGETS[@]}"; do
  case "$t" in gguf|template|request|grammar|schema|tool|imatrix|safetensors|tokenizer) ;; *) echo "unknown fuzz target '$t'" >&2; exit 2 ;; esac
  cmake --build "$BUILD" --target "${t}_fuzz" -j "$(nproc)"
done

run_target() {
  local t=$1 extra=()
  local work="$BUILD/fuzz-$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -n "$ROOT"/tests/fuzz/corpus/"$t"/* "$work/corpus/"  # refresh seeds, keep what was found
  if [ "$t" = gguf ] || [ "$t" = imatrix ]; then
    extra=(-dict="$ROOT/tests/fuzz/gguf.dict" -max_len=8192)
  elif [ "$t" = tokenizer ]; then
    extra=(-dict="$ROOT/tests/fuzz/gguf.dict" -max_len=16384)
  elif [ "$t" = request ] || [ "$t" = safetensors ]; then
    extra=(-max_len=8192)
  elif [ "$t" = grammar ] || [ "$t" = schema ] || [ "$t" = tool ]; then
    extra=(-max_len=2048)
  else
    extra=(-max_len=16384)
    local shared="${TRIAD_TESTDATA:-$ROOT/../shared/testdata}/templates"
    [ -d "$shared" ] && cp -n "$shared"/*.jinja "$work/corpus/" 2>/dev/null || true
  fi
  set +e
  "$BUILD/tests/fuzz/${t}_fuzz" \
    -max_total_time="$RUN_SECONDS" -rss_limit_mb=2048 -timeout=10 "${extra[@]}" \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus"
  local status=$?
  set -e
  if [[ $status -ne 0 ]]; then
    echo "${t}_fuzz failed (exit $status); inputs in $work/artifacts/:" >&2
    ls -l "$work/artifacts/" >&2
    exit "$status"
  fi
  echo "${t}_fuzz: no findings in ${RUN_SECONDS}s; corpus copy: $work/corpus ($(ls "$work/corpus" | wc -l) inputs)"
}
for t in "${TARGETS[@]}"; do run_target "$t"; done

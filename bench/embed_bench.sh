#!/usr/bin/env bash
# The embeddings benchmark of BENCHMARKS.md: all-MiniLM-L6-v2 converted by `triad convert` to
# F32 and Q8_0, served by Triad and by llama.cpp's llama-server --embedding on the same GGUF
# files, one server at a time, alternating, each measured client-side through HTTP by
# bench/embed_bench.py (single sentences of ~30 tokens: batches of 1 / 16 / 64 in one request,
# and 1 / 16 / 64 concurrent single-sentence requests).
# Usage: [TRIAD_BIN=...] bench/embed_bench.sh LLAMA_SERVER [THREADS] [SECONDS] [ROUNDS]
#   LLAMA_SERVER: path of a llama.cpp llama-server binary (built beside the project); "-" skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA=${1:?usage: bench/embed_bench.sh LLAMA_SERVER [THREADS] [SECONDS] [ROUNDS]}
THREADS=${2:-2}
SECONDS_PER_POINT=${3:-8}
ROUNDS=${4:-2}
BIN=${TRIAD_BIN:-build/apps/triad/triad}  # TRIAD_BIN: another build (a before / after pair)
DIR=models/all-MiniLM-L6-v2
[ -d "$DIR" ] || scripts/fetch_models.sh --all
OUT=${TMPDIR:-/tmp}/triad-embed-bench
mkdir -p "$OUT"
for t in f32 q8_0; do
  [ -f "$OUT/minilm-$t.gguf" ] || "$BIN" convert "$DIR" -o "$OUT/minilm-$t.gguf" --outtype "$t" >/dev/null
done
PORT=18431
wait_up() {
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server did not start" >&2
  return 1
}
bench() {  # label, then the server command
  local label=$1
  shift
  "$@" >"$OUT/server.log" 2>&1 &
  local pid=$!
  wait_up
  python3 bench/embed_bench.py --base "http://127.0.0.1:$PORT" --model minilm --seconds "$SECONDS_PER_POINT" --label "$label"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo
}
lscpu | grep -m1 "Model name"
for r in $(seq 1 "$ROUNDS"); do
  for t in f32 q8_0; do
    echo "## round $r, $t"
    bench "triad $t" "$BIN" serve -m "$OUT/minilm-$t.gguf" --alias minilm --port "$PORT" --threads "$THREADS"
    if [ "$LLAMA" != "-" ]; then
      # llama.cpp: 16 parallel slots (its default 4 was slower at 64 concurrent requests), a
      # batch large enough for 16 full inputs.
      # LLAMA_EXTRA: more llama-server options (e.g. --no-repack where its AMX repacking crashes).
      # shellcheck disable=SC2086
      bench "llama.cpp $t" "$LLAMA" -m "$OUT/minilm-$t.gguf" --embedding --port "$PORT" -t "$THREADS" \
        -np 16 -c 8192 -b 8192 -ub 8192 --alias minilm ${LLAMA_EXTRA:-}
    fi
  done
done

#!/usr/bin/env bash
# The serving benchmark of BENCHMARKS.md ("Serving engine"): `triad bench serve` on the
# Qwen2.5 0.5B Q4_K_M model (scripts/fetch_models.sh --bench) at 1 / 4 / 8 / 16 concurrent
# requests of 76 prompt + 128 output tokens, single-stream decode right before for the ratio,
# a 2,000-token shared system prompt (cold vs warm time to first token), and a Poisson run.
# Usage: bench/serve_bench.sh [MODEL] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-models/qwen2.5-0.5b-q4_k_m.gguf}
THREADS=${2:-2}
BIN=build/apps/triad/triad
[ -f "$MODEL" ] || scripts/fetch_models.sh --bench
run() { echo "\$ $BIN $*"; "$BIN" "$@" 2>&1 | grep -v '^\[triad\] info: load'; echo; }
run bench -m "$MODEL" -p 76 -n 128 -r 3 --threads "$THREADS"
for c in 1 4 8 16; do
  run bench serve -m "$MODEL" --threads "$THREADS" -N "$c" --prompt-len 76 --gen-len 128
done
run bench serve -m "$MODEL" --threads "$THREADS" -N 16 --prompt-len 76 --gen-len 128 --shared-prefix 2000
run bench serve -m "$MODEL" --threads "$THREADS" -N 32 --prompt-len 20:200 --gen-len 16:256 --rate 1 --seed 7

#!/usr/bin/env bash
# Quantization speed and accuracy side by side with llama.cpp (same input, same window).
#
#   bench/quantize_bench.sh BASE.gguf TEXT.txt OUT_DIR [TYPES...]
#
# BASE is an F16/BF16/F32 GGUF; PEER_BIN names a folder holding llama.cpp's llama-quantize and
# llama-perplexity (built beside the project, never committed). For each type (default
# Q4_K_M) it times `triad quantize` and `llama-quantize` with 2 threads, alternating, twice
# each; then measures both outputs' KL divergence against BASE with llama-perplexity (so both
# files are scored by the same tool, which also shows our files load in llama.cpp).
# Environment: THREADS (2), CHUNKS (perplexity chunks, 20), CTX (512), IMATRIX (an imatrix
# GGUF passed to both quantizers).
set -euo pipefail
BASE=$1 TEXT=$2 OUT=$3
shift 3
TYPES=("${@:-Q4_K_M}")
[ ${#TYPES[@]} -eq 0 ] && TYPES=(Q4_K_M)
THREADS=${THREADS:-2} CHUNKS=${CHUNKS:-20} CTX=${CTX:-512}
TRIAD=${TRIAD:-$(dirname "$0")/../build/apps/triad/triad}
PEER_BIN=${PEER_BIN:?set PEER_BIN to the llama.cpp bin folder}
mkdir -p "$OUT"
IM_T=() IM_P=()
[ -n "${IMATRIX:-}" ] && IM_T=(--imatrix "$IMATRIX") && IM_P=(--imatrix "$IMATRIX")
secs() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $s" | bc; }
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), threads $THREADS, base $(basename "$BASE") ($(du -m "$BASE" | cut -f1) MB)"
KLD_BASE="$OUT/base.kld"
if [ ! -s "$KLD_BASE" ]; then
  "$PEER_BIN/llama-perplexity" -m "$BASE" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
    --kl-divergence-base "$KLD_BASE" >"$OUT/base.log" 2>&1
fi
for t in "${TYPES[@]}"; do
  for run in 1 2; do
    a=$(secs "$TRIAD" quantize "${IM_T[@]}" --no-error -t "$THREADS" "$BASE" "$OUT/triad-$t.gguf" "$t")
    b=$(secs "$PEER_BIN/llama-quantize" "${IM_P[@]}" "$BASE" "$OUT/llama-$t.gguf" "$t" "$THREADS")
    echo "$t run $run: triad ${a}s, llama.cpp ${b}s"
  done
  for who in triad llama; do
    "$PEER_BIN/llama-perplexity" -m "$OUT/$who-$t.gguf" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" \
      -t "$THREADS" --kl-divergence-base "$KLD_BASE" --kl-divergence >"$OUT/$who-$t.kld.log" 2>&1
    echo "$t $who: size $(du -m "$OUT/$who-$t.gguf" | cut -f1) MB; $(grep -E '^Mean +KLD|^Mean PPL\(Q\)|^Same top p|^99\.0% +KLD' "$OUT/$who-$t.kld.log" | tr -s ' ' | paste -sd ';')"
  done
done

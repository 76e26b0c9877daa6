#!/usr/bin/env bash
# Decode and prefill speed of the precision lever's types, side by side in one window:
#
#   bench/precision_bench.sh BASE.gguf OUT_DIR
#
# BASE is an F16/BF16/F32 GGUF. For the online types (--weight-type fp8_e4m3, int8, q8_0) it
# runs `triad bench` on BASE; for the file types (Q8_0 and the single types Q2_K, Q3_K, IQ4_NL,
# IQ4_XS, written with `triad quantize --pure` into OUT_DIR; MXFP4 layers with Q8_0 elsewhere) it runs `triad bench` and, when
# PEER_BIN names a folder with llama.cpp's llama-bench, llama-bench on the very same file.
# Environment: THREADS (2), PP (512), TG (128), REPS (3), PEER_ARGS (extra llama-bench arguments,
# e.g. "--repack 0" where its AMX repacking dies with SIGILL, as on our Intel Xeon VM).
set -euo pipefail
BASE=$1 OUT=$2
THREADS=${THREADS:-2} PP=${PP:-512} TG=${TG:-128} REPS=${REPS:-3}
TRIAD=${TRIAD:-$(dirname "$0")/../build/apps/triad/triad}
mkdir -p "$OUT"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), threads $THREADS"
tbench() {  # label, args...
  local label=$1; shift
  "$TRIAD" bench "$@" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" 2>&1 \
    | grep -E "^\| (pp|tg)|roofline" | tr -s ' ' | paste -sd ' ' | sed "s|^|$label triad: |"
}
for wt in fp8_e4m3 int8 q8_0; do
  tbench "online $wt" -m "$BASE" --weight-type "$wt"
done
for t in Q8_0 Q2_K Q3_K IQ4_NL IQ4_XS MXFP4; do
  f="$OUT/$t.gguf"
  # MXFP4 is not a mix: the layers' matrices MXFP4, the rest Q8_0.
  if [ "$t" = MXFP4 ]; then args=(--tensor-type 'blk\.=MXFP4' "$BASE" "$f" Q8_0); else args=("$BASE" "$f" "$t"); fi
  [ -s "$f" ] || "$TRIAD" quantize --pure --no-error -t "$THREADS" "${args[@]}" >/dev/null 2>&1 \
    || { echo "$t: triad quantize failed"; continue; }
  tbench "$t" -m "$f"
  if [ -n "${PEER_BIN:-}" ]; then
    "$PEER_BIN/llama-bench" ${PEER_ARGS:-} -m "$f" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" 2>/dev/null \
      | grep -E "pp$PP|tg$TG" | awk -F'|' '{print $(NF-2), $(NF-1)}' | tr -s ' ' | paste -sd ' ' \
      | sed "s|^|$t llama.cpp: |"
  fi
done

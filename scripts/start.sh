#!/usr/bin/env bash
# One command from a fresh machine to a running server: installs dependencies, builds, fetches
# the default model (Gemma 3 270M, Q4_K_M) and starts the OpenAI-compatible server on it at
# http://127.0.0.1:8080/v1 (model name "gemma-3-270m"). Arguments go to `triad serve`, e.g.
#   scripts/start.sh --port 9000 --api-key secret
#   scripts/start.sh -m other.gguf --alias other        (serves that model instead)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/fetch_models.sh
MODEL=${TRIAD_MODEL:-models/gemma-3-270m-q4_k_m.gguf}
has_model=0
for a in "$@"; do
  case "$a" in -m|--model|--model=*) has_model=1 ;; esac
done
if [ "$has_model" = 0 ]; then
  set -- -m "$MODEL" --alias gemma-3-270m "$@"
fi
exec build/apps/triad/triad serve "$@"

#!/usr/bin/env bash
# One command from a fresh machine to a running model: installs dependencies, builds, fetches
# the default model and runs it. Until the HTTP server lands this is `triad run` with a sample
# chat prompt; pass your own arguments to replace the prompt, e.g. scripts/start.sh -p "Hi" -n 64.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/fetch_models.sh
MODEL=${TRIAD_MODEL:-models/gemma-3-270m-q4_k_m.gguf}
if [ $# -eq 0 ]; then
  set -- --chat -p "What is the capital of France? Answer in one sentence." -n 64
fi
exec build/apps/triad/triad run -m "$MODEL" "$@"

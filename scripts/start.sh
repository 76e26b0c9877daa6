#!/usr/bin/env bash
# One command from a fresh machine to a running server: installs dependencies, builds the server
# (only the `triad` binary: the tests build separately, in scripts/test.sh), fetches the default
# model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 469 MiB) and starts the OpenAI-compatible server on
# it at http://127.0.0.1:8080/v1 (model name "qwen2.5-coder-0.5b-instruct"), saying how long each
# stage took. Arguments go to `triad serve`, e.g.
#   scripts/start.sh --port 9000 --api-key secret
#   scripts/start.sh -m other.gguf --alias other        (serves that model instead)
set -euo pipefail
cd "$(dirname "$0")/.."
stage() {  # stage NAME COMMAND...: runs it and reports its duration
  local name=$1 t0=$SECONDS
  shift
  echo "start: $name ..."
  "$@"
  echo "start: $name done in $((SECONDS - t0)) s"
}
stage "dependencies" scripts/setup.sh
stage "build (triad)" env BUILD_TARGET=triad scripts/build.sh
has_model=0 has_alias=0
for a in "$@"; do
  case "$a" in
    -m|-m?*|--model|--model=*) has_model=1 ;;
    --alias|--alias=*) has_alias=1 ;;
  esac
done
if [ "$has_model" = 0 ]; then
  # The model's name: an --alias given on the command line, else TRIAD_MODEL_ALIAS, else ours.
  alias=()
  if [ -n "${TRIAD_MODEL:-}" ]; then  # a model of your own: nothing to fetch
    [ "$has_alias" = 1 ] || alias=(--alias "${TRIAD_MODEL_ALIAS:-$(basename "${TRIAD_MODEL%.gguf}")}")
    set -- -m "$TRIAD_MODEL" "${alias[@]}" "$@"
  else
    stage "default model" scripts/fetch_models.sh
    [ "$has_alias" = 1 ] || alias=(--alias "${TRIAD_MODEL_ALIAS:-qwen2.5-coder-0.5b-instruct}")
    set -- -m "${TRIAD_MODELS_DIR:-models}/qwen2.5-0.5b-q4_k_m.gguf" "${alias[@]}" "$@"
  fi
fi
echo "start: serving (the server logs when it is ready; Ctrl-C stops it)"
exec build/apps/triad/triad serve "$@"

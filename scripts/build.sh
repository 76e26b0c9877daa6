#!/usr/bin/env bash
# Configures and builds Triad (Release) into build/. Extra arguments go to cmake configure.
# BUILD_TARGET=NAME builds only that target (scripts/start.sh: triad).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
if [ -n "${BUILD_TARGET:-}" ]; then
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target "$BUILD_TARGET"
else
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi

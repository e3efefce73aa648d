#!/usr/bin/env bash
# Configures and builds kope into ./build (override with KOPE_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KOPE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${KOPE_BUILD_TYPE:-RelWithDebInfo}" "$@"
fi
cmake --build "$build" -j "$(nproc)"

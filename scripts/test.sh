#!/usr/bin/env bash
# Runs the whole test suite (CTest labels: unit, integration; perf and gpu tests skip or are
# excluded here). Extra arguments go to ctest, e.g. `scripts/test.sh -L unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KOPE_BUILD_DIR:-build}"
# Tests use private caches and data dirs so they never touch the user's.
export KOPE_CACHE_DIR="${KOPE_TEST_CACHE_DIR:-$PWD/$build/test-cache}"
export KOPE_DATA_DIR="$PWD/$build/test-data"
mkdir -p "$KOPE_CACHE_DIR" "$KOPE_DATA_DIR"
# A scratch PostgreSQL for the memory store's tests (they skip, naming why, without one).
export KOPE_POSTGRES_DIR="${KOPE_POSTGRES_DIR:-$PWD/$build/postgres}"  # one per build tree
if pg_env="$(scripts/services/postgres.sh start)"; then eval "$pg_env"; trap 'scripts/services/postgres.sh stop' EXIT
else export KOPE_TEST_POSTGRES_SKIP="scripts/services/postgres.sh start failed"; fi
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900 -LE 'perf|gpu' "$@"

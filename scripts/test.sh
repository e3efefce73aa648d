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
# Both services are stopped on exit, whichever of them started.
stops=()
trap 'for s in "${stops[@]}"; do eval "$s" || true; done' EXIT
if pg_env="$(scripts/services/postgres.sh start)"; then eval "$pg_env"; stops+=("scripts/services/postgres.sh stop")
else export KOPE_TEST_POSTGRES_SKIP="scripts/services/postgres.sh start failed"; fi
# A single-node Slurm for the `--executor slurm` tests; they skip without it.
if slurm_env=$(scripts/services/slurm.sh start "$PWD/$build/slurm" 2>"$PWD/$build/slurm-start.log"); then
  eval "$slurm_env" && stops+=('scripts/services/slurm.sh stop "$KOPE_SLURM_DIR"')
else echo "test.sh: Slurm did not start (see $build/slurm-start.log); the Slurm tests will skip" >&2; fi
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900 -LE 'perf|gpu' "$@"

#!/bin/bash
# The starter-replay figure (issues 13 and 31): `kope run` with no model on a fresh data and
# cache directory, which imports the shipped starter and replays it, timed by /usr/bin/time -v,
# with the load average sampled every 10 s into $D/load.txt. Every suite operator by default (the
# README's first command); OPS=a,b,... selects some; ISA=x86-64-v3 replays as on an AVX2 machine
# (`--isa`); LIBRARY_CONFIG=best times each op against its library at its best configuration
# (`--library-config best`, the issue-31 figure) instead of as the environment sets it.
# Usage: bench/starter_replay.sh [DIR] [KOPE];
# read $D/err.txt (time) and $D/out.txt (the summary table).
D=${1:-/tmp/sf_measure}
KOPE=${2:-$(cd "$(dirname "$0")/.." && pwd)/build/kope}
rm -rf $D; mkdir -p $D/xdg
sel=()
[ -z "${OPS:-}" ] || sel=(--ops "$OPS")
( while true; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> $D/load.txt; sleep 10; done ) &
SAMPLER=$!
cd $D
env -u KOPE_MODEL -u KOPE_PROFILE -u OPENAI_BASE_URL -u OPENAI_API_KEY -u KOPE_MEMORY XDG_CONFIG_HOME=$D/xdg \
  KOPE_TIMING_LOCK=$D/timing.lock KOPE_DATA_DIR=$D/data KOPE_CACHE_DIR=$D/cache \
  /usr/bin/time -v $KOPE run "${sel[@]}" ${JOBS:+--jobs $JOBS} ${ISA:+--isa $ISA} ${LIBRARY_CONFIG:+--library-config $LIBRARY_CONFIG} --run-dir $D/run > $D/out.txt 2> $D/err.txt
echo "rc $?" >> $D/err.txt
kill $SAMPLER

#!/usr/bin/env bash
# isolation_bench.sh: is a kernel's timing the same alone and while kope's own work runs beside it?
#
#   bench/isolation_bench.sh [--rounds R] [--op OP] [--kernel FILE] [--run-ops SELECTOR] [--kope PATH]
#
# Times one kernel with `kope eval --json` (default: bench/replay/softmax/2.cpp on softmax) in R
# interleaved rounds (default 5): once alone, then once while a `kope run --jobs 2 --policy replay`
# on other ops (default: the matmul category) compiles and verifies kernels in parallel (the run
# is restarted with a fresh run directory and memory whenever it finishes early, and stopped
# after the timing). Both share one timing lock private to the bench ($KOPE_TIMING_LOCK), so the
# run's compiles, verifications and data generation wait while the kernel is timed, as they do
# between kope processes on one machine. Per evaluation the figure is the geometric mean of the
# timed cases' median per call; the bench prints every evaluation, then the ratio of the medians
# (during / alone) with a 95% percentile-bootstrap interval over the rounds (seeded, 4000
# resamples), and the interval of each condition's median per call. Isolation holds when the
# interval contains 1. The machine's other load is not under the bench's control: it prints the
# load average at the start and the end.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
rounds=5
op=softmax
kernel=$here/bench/replay/softmax/2.cpp
run_ops=matmul
kope=$here/build/kope
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --op) op=$2; shift 2 ;;
    --kernel) kernel=$2; shift 2 ;;
    --run-ops) run_ops=$2; shift 2 ;;
    --kope) kope=$2; shift 2 ;;
    *) echo "isolation_bench.sh: unknown option $1 (see the file header)" >&2; exit 2 ;;
  esac
done
[ -x "$kope" ] || { echo "isolation_bench.sh: no kope at $kope (build first)" >&2; exit 2; }

scratch=$(mktemp -d /tmp/kope-isolation.XXXXXX)
export KOPE_TIMING_LOCK=$scratch/timing.lock
run_pid=
stop_run() {
  if [ -n "$run_pid" ]; then
    kill -- "-$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
    run_pid=
  fi
}
trap 'stop_run; rm -rf "$scratch"' EXIT

# The background work: kope runs, one after the other, in their own process group.
start_run() {
  setsid bash -c '
    n=0
    while :; do
      n=$((n + 1))
      "$0" run --ops "$1" --jobs 2 --policy replay --iterations 3 --no-reflect --quiet \
        --memory "$2/memory.$3.$n.db" --run-dir "$2/run.$3.$n" > "$2/run.$3.$n.log" 2>&1 || sleep 1
    done' "$kope" "$run_ops" "$scratch" "$1" &
  run_pid=$!
}

# One evaluation: prints the geometric mean of the timed cases' median per call, in µs.
time_once() {
  "$kope" eval --op "$op" "$kernel" --json > "$scratch/eval.json" 2> "$scratch/eval.err" || true
  python3 - "$scratch/eval.json" <<'EOF'
import json, math, sys
r = json.load(open(sys.argv[1]))
if r.get("verdict") != "correct" or not r.get("timing"):
    sys.exit("the kernel was not timed: %s %s" % (r.get("verdict"), r.get("message", "")[:300]))
meds = [t["median_us"] for t in r["timing"]]
cont = max(t.get("contention", 0) for t in r["timing"])
print("%.6g %.3f %d" % (math.exp(sum(map(math.log, meds)) / len(meds)), cont, any(t.get("disturbed") for t in r["timing"])))
EOF
}

echo "isolation_bench: $op with $kernel, $rounds rounds; background: kope run --ops $run_ops --jobs 2 --policy replay"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$kope" eval --op "$op" "$kernel" --no-time > /dev/null 2>&1 || true  # compile cache, reference build
alone=()
during=()
for r in $(seq 1 "$rounds"); do
  read -r us cont dist < <(time_once)
  alone+=("$us")
  echo "round $r alone : $us us per call (contention $cont, disturbed $dist)"
  start_run "$r"
  sleep 3  # the run is compiling and verifying by now
  read -r us cont dist < <(time_once)
  busy=$(ls "$scratch"/run."$r".*.log 2>/dev/null | wc -l)
  stop_run
  during+=("$us")
  echo "round $r during: $us us per call (contention $cont, disturbed $dist; kope runs started in this round: $busy)"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${alone[*]}" "${during[*]}" <<'EOF'
import random, statistics, sys
alone = [float(x) for x in sys.argv[1].split()]
during = [float(x) for x in sys.argv[2].split()]
rng = random.Random(12)
def boot(f, k=4000):
    v = sorted(f() for _ in range(k))
    return v[int(0.025 * k)], v[int(0.975 * k) - 1]
res = lambda xs: [rng.choice(xs) for _ in xs]
ratio = statistics.median(during) / statistics.median(alone)
lo, hi = boot(lambda: statistics.median(res(during)) / statistics.median(res(alone)))
for name, xs in (("alone", alone), ("during", during)):
    a, b = boot(lambda: statistics.median(res(xs)))
    print("%-7s median %.4g us per call [%.4g, %.4g] over %d rounds" % (name, statistics.median(xs), a, b, len(xs)))
print("ratio during / alone: %.3f, 95%% interval [%.3f, %.3f]: %s" % (ratio, lo, hi,
      "contains 1 (isolated)" if lo <= 1 <= hi else "excludes 1 (the run disturbs the timing)"))
EOF

#!/usr/bin/env bash
# self_comparison.sh: is a kernel ever found faster or slower than itself?
#
#   bench/self_comparison.sh [--rounds R] [--load N] [--op OP] [--kernel FILE] [--kope PATH]
#
# Runs `kope eval --incumbent` R times (default 8) with the same kernel as candidate and
# incumbent (each round's candidate gets a fresh comment, so it is built and run as a kernel of
# its own), on tests/ops/matmul/matmul_small by default with a plain i-k-j loop, 1 s per case
# and a 5% CI target (the adversarial test's settings). With --load N, N busy loops (`yes`) run
# beside it, as other tests do in CI. Prints each round's decision, ratio, 95% interval and
# pairs, then how many rounds decided "faster" or "slower": a correct comparison decides
# neither for a tie, beyond its error rate (5% over both sides).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
rounds=8
load=0
op=$here/tests/ops/matmul/matmul_small
kernel=""
kope=$here/build/kope
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --op) op=$2; shift 2 ;;
    --kernel) kernel=$2; shift 2 ;;
    --kope) kope=$2; shift 2 ;;
    *) echo "self_comparison.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
if [ -z "$kernel" ]; then
  kernel=$work/ikj.cpp
  cat > "$kernel" <<'K'
#include <cstdint>
#include <cstring>
extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * N;
    std::memset(c, 0, static_cast<size_t>(N) * sizeof(float));
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[i * K + k];
      const float* b = B + k * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}
K
fi
export KOPE_CACHE_DIR=$work/cache KOPE_DATA_DIR=$work/data
mkdir -p "$KOPE_CACHE_DIR" "$KOPE_DATA_DIR"
for ((i = 0; i < load; ++i)); do yes > /dev/null & pids+=($!); done
echo "machine: $("$kope" hw 2>/dev/null | head -n 1); load: $load busy loop(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
faster=0 slower=0
for ((r = 1; r <= rounds; ++r)); do
  { echo "// round $r $RANDOM$RANDOM"; cat "$kernel"; } > "$work/cand.cpp"
  line=$("$kope" eval "$work/cand.cpp" --op "$op" --incumbent "$kernel" --max-seconds 1 --target-ci 0.05 --json 2>/dev/null |
    python3 -c 'import json,sys
c = json.load(sys.stdin)["incumbent"]
print(c["decision"], "%.3f [%.3f, %.3f] %d pairs%s" % (c["ratio"], c["lower"], c.get("upper") or float("inf"), c["pairs"], ", disturbed" if c.get("disturbed") else ""))')
  echo "round $r: $line"
  case $line in faster_than_incumbent*) faster=$((faster + 1)) ;; slower_than_incumbent*) slower=$((slower + 1)) ;; esac
done
echo "self-comparison: $faster of $rounds faster, $slower slower"

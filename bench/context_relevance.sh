#!/bin/bash
# The issue-17 figure: tokens per prompt per tier, and the share of prompt tokens spent on items
# about operators of other categories, over the same states, for each kope binary given.
#
# Each binary gets a fresh memory holding the shipped starter experience (imported as native
# experience of its target, x86_64-avx2-fma, as a real-model run on that machine would have
# recorded it), then `kope memory retrieve OP --admit` is asked for every op below at the
# draft and the refine stage: the prompt's admission as the agent's active mode makes it
# (window 128000, generation 8192, no hardware block). Prints one line per state and the means.
#
# Usage: bench/context_relevance.sh [KOPE...]   (default: build/kope)
# A "before" binary: apply bench/context_relevance_before.patch (the rules this figure compares
# against: every other-category item a cold candidate, every note every time, one cold cap of
# 25% of B_k), build kope, copy it away, and revert the patch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OPS=${OPS:-conv2d_3x3,layernorm,gelu,sum_rows,sgemm,maxpool2d_2x2,cross_entropy,cumsum}
TARGET=x86_64-avx2-fma
[ $# -gt 0 ] || set -- "$ROOT/build/kope"
for KOPE in "$@"; do
  D=$(mktemp -d /tmp/kope-ctxrel.XXXXXX)
  export KOPE_DATA_DIR=$D/data KOPE_CACHE_DIR=$D/cache KOPE_SHARE_DIR=$ROOT
  "$KOPE" memory --memory "$D/memory.db" import "$ROOT/share/kope/starter/memory.json.zst" > /dev/null
  for op in ${OPS//,/ }; do
    for stage in draft refine; do
      "$KOPE" memory --memory "$D/memory.db" --json retrieve "$op" --target $TARGET --stage $stage --admit > "$D/$op-$stage.json"
    done
  done
  echo "== $KOPE"
  python3 - "$D" <<'PY'
import json, glob, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*-*.json")):
    j = json.load(open(f))
    t = j["tier_tokens"]
    rows.append((j["op"], j["stage"], t.get("hot", 0), t.get("warm", 0), t.get("cold", 0), j["total_tokens"],
                 j["other_category_tokens"], len(j["admitted"])))
print(f"{'op':<16}{'stage':<8}{'hot':>7}{'warm':>7}{'cold':>7}{'total':>8}{'other-cat':>10}{'items':>6}")
for r in rows:
    print(f"{r[0]:<16}{r[1]:<8}{r[2]:>7}{r[3]:>7}{r[4]:>7}{r[5]:>8}{r[6]:>10}{r[7]:>6}")
n = len(rows)
mean = lambda i: sum(r[i] for r in rows) / n
share = sum(r[6] for r in rows) / sum(r[5] for r in rows)
print(f"mean over {n} prompts: hot {mean(2):.0f}, warm {mean(3):.0f}, cold {mean(4):.0f}, total {mean(5):.0f} tokens; "
      f"other categories {mean(6):.0f} tokens per prompt = {100 * share:.1f}% of prompt tokens")
PY
  rm -rf "$D"
done

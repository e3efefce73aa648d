#!/bin/bash
# The issue-28 figures on prompt size: per context mode and stage, the tokens memory adds to a
# prompt beyond the same prompt without memory, and the cacheable prefix (system message +
# per-op part) the prompts of one op share.
#
# A fresh memory holds the shipped starter experience (imported as native experience of its
# target, as a real-model run on that machine would have recorded it; MEMORY=path.json[.zst]
# for another export), then `kope memory retrieve OP --admit --mode M` assembles the prompt of
# every op below at each stage, with this machine's hardware guide (window 128000, generation
# 8192). Prints one line per state and, per mode and stage, the median and the largest figure.
#
# Usage: bench/prompt_memory.sh [KOPE]   (default: build/kope)
#        OPS=a,b,c MODES=none,active,passive,random STAGES=draft,repair,refine bench/prompt_memory.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KOPE=${1:-$ROOT/build/kope}
OPS=${OPS:-conv2d_1x1,conv2d_3x3,layernorm,gelu,gated_tanh,sum_rows,sgemm,maxpool2d_2x2,cross_entropy,cumsum,softmax,attention_causal}
MODES=${MODES:-active,passive,random}
STAGES=${STAGES:-draft,repair,refine}
MEMORY=${MEMORY:-$ROOT/share/kope/starter/memory.json.zst}
TARGET=${TARGET:-x86_64-avx2-fma}
D=$(mktemp -d /tmp/kope-prompt-memory.XXXXXX)
trap 'rm -rf "$D"' EXIT
export KOPE_DATA_DIR=$D/data KOPE_SHARE_DIR=$ROOT
"$KOPE" memory --memory "$D/memory.db" import "$MEMORY" > /dev/null
for op in ${OPS//,/ }; do
  "$KOPE" ops show "$op" > /dev/null 2>&1 || { echo "skipping $op: not in the suite" >&2; continue; }
  for mode in ${MODES//,/ }; do
    for stage in ${STAGES//,/ }; do
      "$KOPE" memory --memory "$D/memory.db" --json retrieve "$op" --target "$TARGET" --stage "$stage" --admit \
        --mode "$mode" > "$D/$op.$mode.$stage.json"
    done
  done
done
python3 - "$D" <<'PY'
import json, glob, sys, statistics
rows = [json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/*.json"))]
print(f"{'op':<18}{'mode':<9}{'stage':<8}{'memory':>8}{'prefix':>8}{'total':>8}{'items':>6}")
for j in rows:
    print(f"{j['op']:<18}{j['mode']:<9}{j['stage']:<8}{j['memory_tokens']:>8}{j['prefix_tokens']:>8}{j['total_tokens']:>8}"
          f"{len(j['admitted']):>6}")
print()
groups = {}
for j in rows:
    groups.setdefault((j["mode"], j["stage"]), []).append(j)
for (mode, stage), js in sorted(groups.items()):
    mem = [j["memory_tokens"] for j in js]
    pre = [j["prefix_tokens"] for j in js]
    print(f"{mode:<8} {stage:<7} memory beyond none: median {statistics.median(mem):.0f}, max {max(mem)} tokens;"
          f" cacheable prefix: median {statistics.median(pre):.0f}, min {min(pre)} tokens ({len(js)} ops)")
PY

#!/bin/bash
# Issue 28's real-model ablation through the development bridge (../shared/tools/llm_bridge.py):
# a training phase on 12 operators, then none / passive / active / random on 12 held-out test
# operators (6 of them at levels 2-4), 4 attempts each, the gap stop rule in every phase
# (STOP_RULE=evidence: the gap rule shortened where memory says refinements seldom won).
#
# The model is played by helper sessions that answer the bridge's spool (see
# ../shared/tools/ANSWERER.md): give each phase its own fresh answerers. `kope ablate` runs the
# phases one after another; `DIR/exp/<phase>/` appearing tells which phase is asking. Keep the
# machine otherwise quiet while a test phase runs (concurrent work marks timings disturbed).
#
# Usage: bench/real_model_ablation.sh DIR [KOPE]   (rerun the same command to resume)
#        TRAIN=a,b TEST=c,d MODES=none,active bench/real_model_ablation.sh DIR
#        FROM_MEMORY=share/kope/starter/memory.json.zst bench/real_model_ablation.sh DIR   (no training
#          phase: every mode starts from that memory, its experience of each test operator held out)
#        PHASE=train bench/real_model_ablation.sh DIR   (one phase now: start its fresh answerers,
#          run it; DIR/spool/STOP is removed before and written after, so they stop when it ends)
#        JOBS=3 ...   (operators in flight: answers overlap, timings still take the machine alone)
#        SIDE_BY_SIDE=15 bench/real_model_ablation.sh DIR   (once every phase is complete: the comparison,
#          then each mode's best kernel timed against none's in alternating batches, 15 s per
#          operator, on a machine with nothing else running; the answerers of a phase load a
#          2-core machine enough to make the runs' own recorded speedups unreliable)
#        EVAL="--eval-ci 0.05 --eval-max-seconds 3" ...   (every phase's timing precision, the
#          default here: kope's 2% / 10 s per timed case costs a 2-core machine ~45 s an attempt,
#          hours over the ~250 attempts of an ablation; the same precision in every mode)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mkdir -p "$1" && cd "$1" && pwd)
KOPE=${2:-$ROOT/build/kope}
TOOLS=${TOOLS:-$ROOT/../shared/tools}
PORT=${PORT:-8765}
TRAIN=${TRAIN:-relu,sigmoid,sum_rows,max_rows,softmax,rmsnorm,cumsum,sgemm,conv2d_3x3,maxpool2d_2x2,matmul_bias_relu,layernorm_residual}
TEST=${TEST:-silu,mean_rows,log_softmax,conv2d_1x1,sgemm_nt,cumsum_exclusive,matmul_bias_gelu,rmsnorm_residual,conv2d_bias_relu,groupnorm_silu,swiglu_ffn,attention_gqa}
MODES=${MODES:-none,passive,active,random}

# The bridge: one per DIR, left running between reruns.
if ! curl -s "http://127.0.0.1:$PORT/v1/models" > /dev/null 2>&1; then
  nohup python3 "$TOOLS/llm_bridge.py" --port "$PORT" --spool "$DIR/spool" --timeout 3400 > "$DIR/bridge.log" 2>&1 &
  sleep 1
fi
cat > "$DIR/kope.toml" <<TOML
[llm]
default = "bridge"

[llm.bridge]
base_url = "http://127.0.0.1:$PORT/v1"
model = "bridge"
api_key_env = ""
stream = false
context_window = 128000
max_output_tokens = 8192
idle_timeout_s = 3500
total_timeout_s = 3500
max_retries = 1
TOML
cd "$DIR"
echo "spool: $DIR/spool (answerers: bash $TOOLS/bridge_claim.sh $DIR/spool)"
if [ -n "${FROM_MEMORY:-}" ]; then from=(--from-memory "$(realpath "$FROM_MEMORY")"); else from=(--train "$TRAIN"); fi
args=(ablate "${from[@]}" --test "$TEST" --modes "$MODES" --iterations 4 --dir "$DIR/exp" --llm bridge
      --stop-rule "${STOP_RULE:-gap}" --jobs "${JOBS:-1}")
for a in ${EVAL:---eval-ci 0.05 --eval-max-seconds 3}; do args+=("--run-arg=$a"); done
if [ -n "${SIDE_BY_SIDE:-}" ]; then args+=(--side-by-side --side-by-side-seconds "$SIDE_BY_SIDE"); fi
if [ -z "${PHASE:-}" ]; then exec "$KOPE" "${args[@]}"; fi
mkdir -p "$DIR/spool" && rm -f "$DIR/spool/STOP"
rc=0; "$KOPE" "${args[@]}" --phase "$PHASE" || rc=$?
touch "$DIR/spool/STOP"
exit $rc

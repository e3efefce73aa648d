#!/usr/bin/env bash
# Rebuilds the starter experience kope ships (share/kope/starter/memory.json.zst): a `kope run`
# with a real model on the starter selection into a fresh memory, exported with its provenance,
# compressed, checked, and put at the share path. See README.md, "The starter experience".
#
#   scripts/refresh_starter.sh --profile NAME [--ops SEL] [--iterations N] [--note TEXT] [-- kope run options]
#   scripts/refresh_starter.sh --bridge [--bridge-script PATH] [--ops SEL] ...   # answers through llm_bridge.py
#   scripts/refresh_starter.sh --from-memory DB --run-dir DIR [--run-dir DIR...] # export runs made earlier
#
# Options: --work DIR (where the memory, runs, spool and export are kept; default
# .kope/starter-refresh-<UTC time>), --out FILE (default share/kope/starter/memory.json.zst),
# --kope PATH (default build/kope), --provenance FILE (a JSON object merged into the export's
# provenance; the export itself lists the targets of every case it writes), --dry-run
# (print the commands only).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

kope="$root/build/kope"
profile="" bridge=0 bridge_script="$root/../shared/tools/llm_bridge.py"
ops="" iterations=8 note="" out="$root/share/kope/starter/memory.json.zst"
work="" from_memory="" provenance="" dry=0
run_dirs=() extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --bridge) bridge=1; shift ;;
    --bridge-script) bridge_script=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --note) note=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --kope) kope=$2; shift 2 ;;
    --from-memory) from_memory=$2; shift 2 ;;
    --provenance) provenance=$(realpath "$2"); shift 2 ;;
    --run-dir) run_dirs+=("$2"); shift 2 ;;
    --dry-run) dry=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "refresh_starter.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { echo "refresh_starter: $*" >&2; }
run() { echo "+ $*" >&2; [ "$dry" = 1 ] || "$@"; }

[ -x "$kope" ] || [ "$dry" = 1 ] || { say "no kope executable at $kope (build first: scripts/build.sh)"; exit 2; }
if [ -z "$from_memory" ] && [ -z "$profile" ] && [ "$bridge" = 0 ]; then
  say "name a model: --profile NAME (a profile of kope.toml), or --bridge; or export earlier runs with --from-memory"
  exit 2
fi
work=${work:-$root/.kope/starter-refresh-$(date -u +%Y%m%d-%H%M%S)}
work=$(realpath -m "$work")
run mkdir -p "$work"

bridge_pid=""
cleanup() { if [ -n "$bridge_pid" ]; then kill "$bridge_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

if [ -n "$from_memory" ]; then
  memory=$(realpath "$from_memory")
  [ ${#run_dirs[@]} -gt 0 ] || say "warning: no --run-dir given, so the provenance names no model or run"
else
  memory="$work/memory.db"
  if [ -e "$memory" ]; then say "$memory exists; the starter is made from a fresh memory (choose another --work)"; exit 2; fi
  if [ "$bridge" = 1 ]; then
    # A loopback OpenAI-compatible endpoint whose answers are written into a spool (ANSWERER.md).
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    spool="$work/spool"
    run mkdir -p "$spool"
    echo "+ python3 $bridge_script --port $port --spool $spool &" >&2
    if [ "$dry" = 0 ]; then
      python3 "$bridge_script" --port "$port" --spool "$spool" &
      bridge_pid=$!
    fi
    profile=bridge
    [ "$dry" = 1 ] || cat > "$work/kope.toml" <<TOML
[llm.bridge]
base_url = "http://127.0.0.1:$port/v1"
model = "bridge"
api_key_env = ""
context_window = 128000
max_output_tokens = 16000
idle_timeout_s = 1700
total_timeout_s = 1700
max_retries = 1
TOML
    note=${note:-"every answer was written into the llm_bridge.py spool $spool by answerers following ANSWERER.md (prompt only, no compiling)"}
    say "answer the requests in $spool (bridge_claim.sh / bridge_answer.sh) while the run waits"
  fi
  sel=()
  [ -z "$ops" ] || sel=(--ops "$ops")
  # The starter is this model's own experience: a fresh memory, and no old starter imported into it.
  (cd "$work" && run "$kope" run --llm "$profile" "${sel[@]}" --iterations "$iterations" --memory "$memory" \
     --run-dir "$work/run" --no-starter "${extra[@]}")
  run_dirs=("$work/run")
fi

exp=(--memory "$memory" -o "$work/memory.json.zst")
for d in "${run_dirs[@]}"; do exp+=(--run-dir "$d"); done
[ -z "$note" ] || exp+=(--note "$note")
[ -z "$provenance" ] || exp+=(--provenance "$provenance")
run "$kope" memory export "${exp[@]}"
# The export must import cleanly and pass the memory's own checks.
run rm -f "$work/check.db" "$work/check.db-wal" "$work/check.db-shm"
run "$kope" memory import "$work/memory.json.zst" --foreign --memory "$work/check.db"
run "$kope" memory check --memory "$work/check.db"
run "$kope" memory stats "$work/memory.json.zst"
run install -D -m 0644 "$work/memory.json.zst" "$out"
say "placed $out; now check every kernel in it here: scripts/test.sh -R Starter (and commit the file)"

#!/usr/bin/env bash
# The CUDA backend end to end on a GPU machine, in a few minutes: builds kope, evaluates every
# kernel of tests/cuda/corpus (honest ones and cheats) with `kope eval --backend cuda`, and
# prints a table of expected vs obtained verdicts with the device and wall times. Exits 1 when
# a verdict differs, 2 when the machine cannot run it (no nvcc, no GPU).
#
#   scripts/gpu_check.sh [--dry-run] [--build-dir DIR] [--arch sm_90] [--max-seconds S]
#
# --dry-run checks the script's prerequisites that need no GPU and prints the plan (the table
# of kernels, ops and expected verdicts, and the commands) without building or running.
set -euo pipefail
cd "$(dirname "$0")/.."

dry_run=0
build_dir="${KOPE_BUILD_DIR:-build}"
arch="${KOPE_CUDA_ARCH:-}"
max_seconds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --build-dir) build_dir="$2"; shift ;;
    --arch) arch="$2"; shift ;;
    --max-seconds) max_seconds="$2"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$arch" ] && export KOPE_CUDA_ARCH="$arch"

corpus=tests/cuda/corpus
header() { sed -n "s|^// $1: ||p" "$2" | head -n 1; }
op_dir() { find tests/ops ops -mindepth 2 -maxdepth 2 -type d -name "$1" 2>/dev/null | head -n 1; }

nvcc_path=""
for c in "${KOPE_NVCC:-}" "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
  if [ -n "$c" ] && [ -x "$c" ]; then nvcc_path="$c"; break; fi
done
gpu=""
if command -v nvidia-smi > /dev/null 2>&1; then
  gpu="$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -n 1 || true)"
fi

echo "kope GPU check: nvcc ${nvcc_path:-not found}; GPU ${gpu:-none}; build dir $build_dir"
printf '%-26s %-14s %-14s\n' "kernel" "op" "expected"
plan=()
for f in "$corpus"/*.cu; do
  op="$(header op "$f")"
  expect="$(header expect "$f")"
  dir="$(op_dir "$op")"
  if [ -z "$op" ] || [ -z "$expect" ] || [ -z "$dir" ]; then
    echo "gpu_check.sh: $f lacks an '// op:' or '// expect:' header, or op '$op' is unknown" >&2
    exit 2
  fi
  plan+=("$f|$dir|$expect")
  printf '%-26s %-14s %-14s\n' "$(basename "$f")" "$op" "$expect"
done

build_cmd=(cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKOPE_TESTS=OFF -DKOPE_BENCH=OFF)
make_cmd=(cmake --build "$build_dir" -j "$(nproc)" --target kope kope-runner)
if [ "$dry_run" = 1 ]; then
  echo "dry run: would run: ${build_cmd[*]}"
  echo "dry run: would run: ${make_cmd[*]}"
  echo "dry run: then per kernel: $build_dir/kope eval --backend cuda KERNEL --op OPDIR --json --max-seconds $max_seconds"
  [ -z "$nvcc_path" ] && echo "dry run: note: nvcc is not installed here; the real run needs it"
  [ -z "$gpu" ] && echo "dry run: note: no GPU here; the real run needs one"
  exit 0
fi
if [ -z "$nvcc_path" ]; then echo "gpu_check.sh: nvcc not found (set KOPE_NVCC or install the CUDA toolkit)" >&2; exit 2; fi
if [ -z "$gpu" ]; then echo "gpu_check.sh: no GPU (nvidia-smi lists none)" >&2; exit 2; fi

start=$(date +%s)
[ -f "$build_dir/build.ninja" ] || "${build_cmd[@]}" > "$build_dir.configure.log" 2>&1 || { cat "$build_dir.configure.log"; exit 2; }
"${make_cmd[@]}" > "$build_dir.build.log" 2>&1 || { tail -n 40 "$build_dir.build.log"; exit 2; }
echo "built in $(( $(date +%s) - start )) s"
export KOPE_CACHE_DIR="$PWD/$build_dir/gpu-check-cache" KOPE_DATA_DIR="$PWD/$build_dir/gpu-check-data"
mkdir -p "$KOPE_CACHE_DIR" "$KOPE_DATA_DIR"
"$build_dir/kope" backends || true

printf '\n%-26s %-14s %-14s %-14s %12s %12s %9s  %s\n' "kernel" "op" "expected" "got" "device µs" "wall µs" "speedup" "result"
failures=0
for entry in "${plan[@]}"; do
  IFS='|' read -r f dir expect <<< "$entry"
  out="$("$build_dir/kope" eval --backend cuda "$f" --op "$dir" --json --max-seconds "$max_seconds" 2> "$build_dir/gpu-check.err" || true)"
  summary="$(printf '%s' "$out" | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
except Exception:
    print("error - - - kope failed"); sys.exit(0)
t = r.get("timing") or [{}]
med = t[0].get("median_us"); wall = t[0].get("wall_us"); sp = r.get("speedup_vs_reference")
f = lambda v, fmt: (fmt % v) if isinstance(v, (int, float)) else "-"
print(r.get("verdict", "?"), f(med, "%.1f"), f(wall, "%.1f"), f(sp, "%.2fx"), r.get("message", "").replace("\n", " ")[:90])
')"
  read -r got med wall sp msg <<< "$summary"
  result=ok
  if [ "$got" != "$expect" ]; then result=FAIL; failures=$((failures + 1)); fi
  printf '%-26s %-14s %-14s %-14s %12s %12s %9s  %s\n' "$(basename "$f")" "$(basename "$dir")" "$expect" "$got" "$med" "$wall" "$sp" "$result"
  if [ "$result" = FAIL ]; then echo "    $msg"; tail -n 3 "$build_dir/gpu-check.err" | sed 's/^/    /'; fi
done
echo "$(( ${#plan[@]} - failures )) of ${#plan[@]} kernels got their verdict in $(( $(date +%s) - start )) s"
[ "$failures" = 0 ]

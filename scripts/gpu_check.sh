#!/usr/bin/env bash
# The CUDA backend end to end on a GPU machine, in under 8 minutes on one H200:
#   1. builds kope (Release, no tests);
#   2. evaluates every kernel of tests/cuda/corpus (honest ones and cheats) with
#      `kope eval --backend cuda`: expected vs obtained verdict, device and wall time;
#   3. every suite op that has a GPU vendor baseline (ops/*/*/gpu_library.cu: cuBLAS, cuBLASLt,
#      cuDNN, or kope's labelled cuda-naive kernel) with `kope bench --backend cuda`: the
#      baseline verified against the op's reference and timed by the device clock on every
#      timed case (its verdict, time, library and configuration); the GPU probe's roofline
#      (cached in $KOPE_CACHE_DIR/gpu-hw.json) is measured on the way;
#   4. one short `kope run --backend cuda` (2 iterations of tests/e2e's e2e_scale) against the
#      fake OpenAI-compatible model server of tests/e2e (fake_llm_server.py, CUDA fixtures);
#   5. a final table of every step's verdicts and timings.
# Exits 1 when a verdict differs or a step fails, 2 when the machine cannot run it (no nvcc,
# no GPU).
#
#   scripts/gpu_check.sh [--dry-run] [--build-dir DIR] [--arch sm_90] [--max-seconds S]
#                        [--skip-corpus] [--skip-baselines] [--skip-run]
#
# --max-seconds caps the timing of each corpus evaluation's timed case (1 s); the baselines are
# timed for at most 0.2 s per case. --skip-* leave a step out.
# --dry-run checks the script's prerequisites that need no GPU and prints the plan (the corpus
# kernels with their expected verdicts, the ops with GPU baselines and their libraries, the
# commands) without building or running.
set -euo pipefail
cd "$(dirname "$0")/.."

dry_run=0
build_dir="${KOPE_BUILD_DIR:-build}"
arch="${KOPE_CUDA_ARCH:-}"
max_seconds=1
skip_corpus=0
skip_baselines=0
skip_run=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --skip-corpus) skip_corpus=1 ;;
    --skip-baselines) skip_baselines=1 ;;
    --skip-run) skip_run=1 ;;
    --build-dir) build_dir="$2"; shift ;;
    --arch) arch="$2"; shift ;;
    --max-seconds) max_seconds="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
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

# The ops with a GPU baseline, and the library each names in its first line.
printf '\n%-26s %-12s %s\n' "op with a GPU baseline" "library" "folder"
baseline_ops=()
while IFS= read -r f; do
  dir="$(dirname "$f")"
  lib="$(sed -n '1s|^// kope-library: ||p' "$f")"
  if [ -z "$lib" ]; then echo "gpu_check.sh: $f does not name its library in its first line" >&2; exit 2; fi
  baseline_ops+=("$dir")
  printf '%-26s %-12s %s\n' "$(basename "$dir")" "$lib" "$dir"
done < <(find ops -mindepth 3 -maxdepth 3 -name gpu_library.cu | sort)
without=$(( $(find ops -mindepth 2 -maxdepth 2 -type d | wc -l) - ${#baseline_ops[@]} ))
echo "${#baseline_ops[@]} ops have a GPU baseline; $without have none (their speedup_vs_library stays empty on the cuda backend)"

e2e_op=tests/e2e/ops/elementwise/e2e_scale
run_args=(run --backend cuda --iterations 2 --llm fake --seed 7 --eval-ci 0.2 --eval-max-seconds 0.5
          --patience 0 --roofline-target 0 --no-starter)
bench_args=(bench --backend cuda --json --max-seconds 0.2 --target-ci 0.1)

build_cmd=(cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKOPE_TESTS=OFF -DKOPE_BENCH=OFF)
make_cmd=(cmake --build "$build_dir" -j "$(nproc)" --target kope kope-runner)
if [ "$dry_run" = 1 ]; then
  echo "dry run: would run: ${build_cmd[*]}"
  echo "dry run: would run: ${make_cmd[*]}"
  echo "dry run: then per kernel: $build_dir/kope eval --backend cuda KERNEL --op OPDIR --json --max-seconds $max_seconds"
  echo "dry run: then: $build_dir/kope ${bench_args[*]} OPDIR... (the ${#baseline_ops[@]} ops above)"
  echo "dry run: then: python3 tests/e2e/fake_llm_server.py --fixtures tests/e2e/fixtures --port-file PORT --log LOG (background)"
  echo "dry run: then: $build_dir/kope ${run_args[*]} --ops $e2e_op --memory DIR/memory.db --run-dir DIR/run (kope.toml: [llm.fake] at the server)"
  echo "dry run: skipped steps: corpus=$skip_corpus baselines=$skip_baselines run=$skip_run"
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
root="$PWD"
build_abs="$(cd "$build_dir" && pwd)"
kope_bin="$build_abs/kope"
export KOPE_CACHE_DIR="$build_abs/gpu-check-cache" KOPE_DATA_DIR="$build_abs/gpu-check-data"
mkdir -p "$KOPE_CACHE_DIR" "$KOPE_DATA_DIR"
"$build_dir/kope" backends || true

summary_lines=()
failures=0
corpus_ok=0
if [ "$skip_corpus" = 0 ]; then
printf '\n%-26s %-14s %-14s %-14s %12s %12s %9s  %s\n' "kernel" "op" "expected" "got" "device µs" "wall µs" "speedup" "result"
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
  [ "$result" = ok ] && corpus_ok=$((corpus_ok + 1))
  summary_lines+=("$(printf '%-10s %-28s %-16s %-16s %14s  %s' corpus "$(basename "$f")" "$expect" "$got" "$med" "$result")")
done
echo "$corpus_ok of ${#plan[@]} kernels got their verdict in $(( $(date +%s) - start )) s"
fi

# --- GPU baselines: verified against the reference, timed by the device clock ----------------
baselines_ok=0
baselines_total=0
if [ "$skip_baselines" = 0 ]; then
  t0=$(date +%s)
  echo
  echo "GPU baselines of ${#baseline_ops[@]} ops (kope bench --backend cuda; the GPU probe runs first when not cached)"
  "$build_dir/kope" bench "${bench_args[@]:1}" "${baseline_ops[@]}" > "$build_dir/gpu-check-bench.json" 2> "$build_dir/gpu-check-bench.err" || true
  bench_table="$(python3 - "$build_dir/gpu-check-bench.json" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("ERROR kope bench printed no JSON: %s" % e)
    sys.exit(0)
print("# device: %s (%s)" % (doc.get("device", "?"), doc.get("target", "?")))
for r in doc.get("rows", []):
    if "error" in r:
        print("%s\t-\terror\t-\t-\t%s" % (r["op"], r["error"].splitlines()[0][:100]))
        continue
    lib = r.get("library_us")
    verdict = "correct" if isinstance(lib, (int, float)) and not r.get("library_problem") else "failed"
    ref = r.get("reference_us")
    print("%s\t%s\t%s\t%s\t%s\t%s" % (r["op"], r.get("label", "?").replace(" ", ","), verdict,
          "%.1f" % lib if isinstance(lib, (int, float)) else "-", "%.1f" % ref if isinstance(ref, (int, float)) else "-",
          (r.get("library_config") or r.get("library_problem") or "")[:110]))
PY
)"
  printf '\n%-24s %-26s %-9s %12s %14s  %s\n' "op" "case" "baseline" "GPU µs" "CPU ref µs" "library / problem"
  while IFS=$'\t' read -r op label verdict lib ref what; do
    if [ "${op:0:1}" = "#" ] || [ "$op" = ERROR ]; then echo "$op $label $verdict $lib $ref $what"; [ "$op" = ERROR ] && failures=$((failures + 1)); continue; fi
    printf '%-24s %-26s %-9s %12s %14s  %s\n' "$op" "$label" "$verdict" "$lib" "$ref" "$what"
    baselines_total=$((baselines_total + 1))
    if [ "$verdict" = correct ]; then baselines_ok=$((baselines_ok + 1)); else failures=$((failures + 1)); fi
    summary_lines+=("$(printf '%-10s %-28s %-16s %-16s %14s  %s' baseline "$op" "correct" "$verdict" "$lib" "$( [ "$verdict" = correct ] && echo ok || echo FAIL)")")
  done <<< "$bench_table"
  { grep -E "problem|error|failed" "$build_dir/gpu-check-bench.err" || true; } | head -n 20 | sed 's/^/    /'
  echo "$baselines_ok of $baselines_total timed cases have a verified, timed GPU baseline ($(( $(date +%s) - t0 )) s)"
fi

# --- one short kope run against the fake model server -------------------------------------
run_result=skipped
if [ "$skip_run" = 0 ]; then
  t0=$(date +%s)
  proj="$build_abs/gpu-check-run"
  rm -rf "$proj"
  mkdir -p "$proj/xdg"
  python3 tests/e2e/fake_llm_server.py --fixtures tests/e2e/fixtures --port-file "$proj/port" --log "$proj/requests.jsonl" &
  server=$!
  trap 'kill "$server" 2> /dev/null || true' EXIT
  for _ in $(seq 100); do [ -s "$proj/port" ] && break; sleep 0.1; done
  port="$(cat "$proj/port" 2> /dev/null || true)"
  if [ -z "$port" ]; then
    echo "gpu_check.sh: the fake model server did not start" >&2
    run_result=FAIL
  else
    printf '[llm.fake]\nbase_url = "http://127.0.0.1:%s/v1"\nmodel = "fake-kernel-model"\napi_key_env = ""\ncontext_window = 32000\nmax_output_tokens = 2000\nmax_retries = 1\n' "$port" > "$proj/kope.toml"
    echo
    echo "kope run --backend cuda against the fake model server (port $port)"
    if (cd "$proj" && env -u KOPE_MODEL -u KOPE_PROFILE -u OPENAI_BASE_URL -u OPENAI_API_KEY -u KOPE_MEMORY XDG_CONFIG_HOME="$proj/xdg" \
          "$kope_bin" "${run_args[@]}" --ops "$root/$e2e_op" --memory "$proj/memory.db" --run-dir "$proj/run" --quiet) \
          > "$proj/run.out" 2> "$proj/run.err"; then
      run_result="$(python3 - "$proj/run/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
op = next((o for o in r.get("ops", []) if o.get("name") == "e2e_scale"), {})
sp = op.get("best_speedup_vs_reference")
print("%s %s attempts=%s verdicts=%s best_vs_ref=%s" % ("ok" if op.get("solved") else "FAIL", "solved" if op.get("solved") else "unsolved",
      op.get("attempts"), json.dumps(op.get("verdicts", {}), separators=(",", ":")), "%.2fx" % sp if isinstance(sp, (int, float)) else "-"))
PY
)" || run_result="FAIL results.json unreadable"
    else
      run_result="FAIL kope run exited non-zero: $(tail -n 3 "$proj/run.err" | tr '\n' ' ')"
    fi
  fi
  kill "$server" 2> /dev/null || true
  trap - EXIT
  echo "kope run: $run_result ($(( $(date +%s) - t0 )) s)"
  [ "${run_result%% *}" = ok ] || failures=$((failures + 1))
  summary_lines+=("$(printf '%-10s %-28s %-16s %-16s %14s  %s' run e2e_scale solved "${run_result#* }" "-" "${run_result%% *}")")
fi

echo
echo "summary ($(( $(date +%s) - start )) s in all; device: $gpu)"
printf '%-10s %-28s %-16s %-16s %14s  %s\n' step item expected got "µs" result
for line in "${summary_lines[@]}"; do echo "$line"; done
[ "$failures" = 0 ]

#!/usr/bin/env bash
# Verifies every kernel of a starter export (default: the shipped share/kope/starter/memory.json.zst)
# on this machine: each distinct correct kernel whose recorded target this CPU runs is judged by
# `kope eval --no-time` on every case of its op, compiled for the level it was recorded at (a kernel
# of the x86-64-v3 target "x86_64-avx2-fma" under --isa x86-64-v3, others native). Kernels of a
# target this CPU lacks (AVX-512 on an AVX2 machine) or of another backend are counted as skipped.
# tests/starter judges a sample (one kernel per op); this judges all of them.
#
#   bench/starter_verify.sh [EXPORT] [--kope PATH] [--jobs N]
#
# Prints one line per kernel and a summary; exits 1 when any kernel is not correct here.
set -euo pipefail
cd "$(dirname "$0")/.."
export_file=share/kope/starter/memory.json.zst kope=build/kope jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --kope) kope=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) export_file=$1; shift ;;
  esac
done
[ -x "$kope" ] || { echo "starter_verify: no kope at $kope (scripts/build.sh first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$("$kope" hw --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["target"])')
zstd -dcq "$export_file" > "$work/export.json" 2>/dev/null || cp "$export_file" "$work/export.json"
# One line per kernel to judge: file, op, isa, key; skipped kernels are counted in $work/skipped.
python3 - "$work" "$here" <<'PY'
import glob, hashlib, json, os, sys
work, here = sys.argv[1], sys.argv[2]
def parts(t):
    arch, _, rest = t.partition("-")
    return arch, set(f for f in rest.split("-") if f)
harch, hfeat = parts(here)
doc = json.load(open(f"{work}/export.json"))
seen, todo, skipped = set(), [], []
for c in doc["cases"]:
    if c.get("verdict") != "correct" or c.get("quarantined"):
        continue
    op, code = c["task"]["op"], c.get("code", "")
    h = hashlib.sha256(code.encode()).hexdigest()
    if (op, h) in seen:
        continue
    seen.add((op, h))
    backend = (c.get("toolchain") or {}).get("backend") or "cpu"
    target = (c.get("hardware") or {}).get("target", "")
    arch, feat = parts(target)
    if backend != "cpu":
        skipped.append(f"{op} {c.get('natural_key','')}: backend {backend}")
        continue
    if arch != harch or not feat <= hfeat:
        skipped.append(f"{op} {c.get('natural_key','')}: recorded for {target}, this CPU is {here}")
        continue
    isa = "x86-64-v3" if target == "x86_64-avx2-fma" else "native"
    f = f"{work}/k{len(todo):04d}-{op}.cpp"
    open(f, "w").write(code)
    # An ops-kernelbench operator (the starter holds both suites) by its folder, others by name.
    kb = glob.glob(f"ops-kernelbench/*/{op}/op.toml")
    where = os.path.dirname(kb[0]) if kb else op
    todo.append(f"{f}\t{where}\t{isa}\t{c.get('natural_key','')}")
open(f"{work}/todo.tsv", "w").write("".join(t + "\n" for t in todo))
open(f"{work}/skipped.txt", "w").write("".join(s + "\n" for s in skipped))
PY
judge() {
  local file=$1 op=$2 isa=$3 key=$4 out verdict
  out=$("$kope" eval "$file" --op "$op" --isa "$isa" --no-time --json 2>/dev/null || true)
  verdict=$(python3 -c 'import json,sys
try: print(json.loads(sys.stdin.read()).get("verdict","?"))
except Exception: print("no-json")' <<<"$out")
  printf '%s\t%s\t%s\t%s\n' "$verdict" "$op" "$isa" "$key"
}
export -f judge
export kope
start=$(date +%s)
tr '\t' '\n' < "$work/todo.tsv" | xargs -d '\n' -n 4 -P "$jobs" bash -c 'judge "$@"' _ > "$work/verdicts.tsv"
sort -k2 "$work/verdicts.tsv"
total=$(wc -l < "$work/verdicts.tsv")
bad=$(awk -F'\t' '$1 != "correct"' "$work/verdicts.tsv" | wc -l)
nskip=$(wc -l < "$work/skipped.txt")
echo "starter_verify: $export_file on $here: $((total - bad)) of $total kernels correct, $nskip skipped, $(( $(date +%s) - start )) s"
[ "$nskip" = 0 ] || sed 's/^/  skipped: /' "$work/skipped.txt"
[ "$bad" = 0 ]

#!/bin/bash
# Which oneDNN implementation every library baseline runs (issue 31: baselines beyond suspicion).
# Runs the suite's ReferenceVsLibrary test (each library in-process on every case) with
# ONEDNN_VERBOSE=1 and prints, per op, the primitives oneDNN ran on its reference code (ref:any:
# 100-1000x slower than its JIT kernels, a baseline no one would choose), with their shapes and
# milliseconds. ISA=AVX2 (or any ONEDNN_MAX_CPU_ISA value) checks the x86-64-v3 level on an
# AVX-512 host. Usage: [ISA=AVX2] bench/library_impls.sh [BUILD_DIR]
set -euo pipefail
B=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
env ${ISA:+ONEDNN_MAX_CPU_ISA=$ISA} ONEDNN_VERBOSE=1 KOPE_CACHE_DIR=${KOPE_CACHE_DIR:-$B/test-cache} \
  "$B/tests/kope_suite_tests" --gtest_filter='*ReferenceVsLibrary*' > "$out" 2>&1 || { tail -20 "$out"; exit 1; }
python3 - "$out" <<'E'
import collections, re, sys
op, impls, refs = None, collections.Counter(), collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'\[ RUN\s+\] .*AgreeOnEveryCase/(\w+)', line)
    if m:
        op = m.group(1)
    elif line.startswith('onednn_verbose,exec') and op:
        f = line.strip().split(',')
        impls[f[3] + ' ' + f[4]] += 1
        if f[4].startswith('ref'):
            refs[op].append(f'{f[3]} {f[-2]} {f[-1]} ms')
print('implementations (primitive executions):')
for k, n in impls.most_common():
    print(f'  {n:5d}  {k}')
print('on oneDNN\'s reference code:' if refs else 'no primitive ran on oneDNN\'s reference code')
for o, rs in sorted(refs.items()):
    for r in rs:
        print(f'  {o}: {r}')
E

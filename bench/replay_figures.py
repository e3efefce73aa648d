#!/usr/bin/env python3
"""The issue-31 figures of a run: per operator its speed over the library and the reference and its
fraction of the roofline; geomeans over the library-backed operators, overall and per level; the
operators below 0.9x the library; the median roofline fraction of the memory-bound categories; the
GEMM-class operators' fractions of the FMA peak.

    bench/replay_figures.py RUN_DIR/results.json          (e.g. after bench/starter_replay.sh DIR:
                                                           DIR/run/results.json)
"""
import json
import math
import statistics
import sys

MEMORY_BOUND = {'elementwise', 'reduction', 'normalization', 'data-movement', 'pooling', 'loss', 'scan'}
GEMM = {'sgemm', 'sgemm_nt', 'dgemm', 'batched_matmul'}


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')


def fmt(x, scale=1, digits=2):
    return '-' if x is None else str(round(x * scale, digits))


def main(path):
    with open(path) as f:
        results = json.load(f)
    ops = results['operators'] if 'operators' in results else results['ops']
    vs_library, by_level, roofs, below = [], {}, [], []
    print(f"{'operator':28s} {'level':>5s} {'category':14s} {'library':>7s} {'reference':>9s} {'roof %':>6s} {'attempts':>8s} stop")
    for o in sorted(ops, key=lambda o: (o['level'], o['category'], o['name'])):
        lib, ref, roof = o.get('best_speedup_vs_library'), o.get('best_speedup_vs_reference'), o.get('fraction_of_roofline')
        print(f"{o['name']:28s} {o['level']:5d} {o['category']:14s} {fmt(lib):>7s} {fmt(ref):>9s} {fmt(roof, 100, 0):>6s} "
              f"{o['attempts']:8d} {o.get('stop_reason')}")
        if lib:
            vs_library.append(lib)
            by_level.setdefault(o['level'], []).append(lib)
            if lib < 0.9:
                below.append((o['name'], round(lib, 2)))
        if roof is not None and o['category'] in MEMORY_BOUND:
            roofs.append(roof)
    figures = results.get('figures', {})
    print(f"solved {figures.get('solved')} of {figures.get('ops')}; geomean vs the reference {fmt(figures.get('geomean_speedup_vs_reference'))}")
    # Which configuration the libraries ran with: issue 31's figure is against each at its best
    # (`--library-config best`); "environment" is as the environment sets it (OPENBLAS_CORETYPE...),
    # and "forced" counts the operators whose library a variable pinned to other kernels.
    configs = [o['library_config'] for o in ops if isinstance(o.get('library_config'), dict)]
    settings = sorted({c.get('setting', '?') for c in configs})
    forced = sum(1 for c in configs if c.get('forced'))
    print(f"geomean vs the library {geomean(vs_library):.3f} over {len(vs_library)} operators; per level "
          + ', '.join(f"L{k} {geomean(v):.2f} ({len(v)})" for k, v in sorted(by_level.items()))
          + f"; library configuration: {', '.join(settings) or '-'} ({forced} forced)")
    print('below 0.9x the library:', ', '.join(f'{n} {x}' for n, x in sorted(below, key=lambda b: b[1])) or 'none')
    if roofs:
        print(f"memory-bound median fraction of the roofline: {statistics.median(roofs) * 100:.0f}% over {len(roofs)} operators")
    gemm = {o['name']: fmt(o.get('fraction_of_roofline'), 100, 0) for o in ops if o['name'] in GEMM}
    if gemm:
        print('GEMM-class fraction of the FMA peak (%):', ', '.join(f'{k} {v}' for k, v in sorted(gemm.items())))


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

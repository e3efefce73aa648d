#!/usr/bin/env python3
"""Compares the figures of two sets of run results (results.json files).

Usage: scripts/compare_results.py BEFORE AFTER [--show-measured]

BEFORE and AFTER are folders holding results.json files at the same relative paths (for example
what the e2e tests copy with KOPE_E2E_SAVE_RESULTS=<dir>), or two results.json files. Every
value is compared except the ones a run measures or stamps: timings and what is computed from
them (speedups, roofline fractions, wall time), run ids, dates and temporary paths. Those are
listed with --show-measured, never counted as differences.

Exit status: 0 when the figures are identical, 1 when any differs (each difference is printed
as `file: path: before != after`), 2 on bad input.
"""
import json
import pathlib
import sys

# Keys whose values depend on the machine, its load, the clock or the test's environment, not on
# what the agent decided. Two runs of the same build differ in them (measured by running the e2e
# tests twice): timings and what follows from them (speedups, the share of ops faster than p
# (fast_p: a speedup near p crosses it), the outcome labels computed from r,
# the roofline fractions, the disturbed-timing counts), prompt sizes (prompts show the measured
# numbers, so the tokens per tier, the prompt tokens and their sums vary with them), case ids
# (two op threads write the memory in either order), and the run's stamps (ids, dates, ports,
# temporary folders, the seed drawn when --seed is not given) and where files lie in the run
# directory (best_code_file: a run through Slurm keeps its tasks' candidates under tasks/<i>/).
MEASURED = {
    "run_id", "created_at", "dir", "run_dir", "time", "base_url", "seed", "memory", "suite_root",
    "results_path", "best_code_file", "wall_seconds", "llm_seconds", "eval_seconds",
    "best_speedup_vs_reference", "best_speedup_vs_library", "fraction_of_roofline",
    "geomean_speedup_vs_reference", "geomean_speedup_vs_library",
    "fraction_of_roofline_geomean", "fraction_of_roofline_median", "labels",
    "best_timing_disturbed", "disturbed_attempts", "disturbed_best",
    "library_config", "library_forced", "library_forced_ops", "library_forced_by",
    "tier_tokens", "tokens_prompt", "tokens_total", "tokens_per_solved_op", "tokens_prompt_per_solved_op",
    "best_case_id", "cost_usd", "fast_p", "fast_p_vs_library",
}


def walk(a, b, path, out, measured):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k in MEASURED:
                if a.get(k) != b.get(k):
                    measured.append((p, a.get(k), b.get(k)))
                continue
            if k not in a or k not in b:
                out.append((p, a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                walk(a[k], b[k], p, out, measured)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            name = x.get("name") if isinstance(x, dict) else None
            walk(x, y, f"{path}[{name if name else i}]", out, measured)
    elif a != b or type(a) is not type(b):
        out.append((path, a, b))


def result_files(root):
    root = pathlib.Path(root)
    if root.is_file():
        return {root.name: root}
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("results.json"))}


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    show = "--show-measured" in argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = result_files(args[0]), result_files(args[1])
    if not before:
        print(f"no results.json under {args[0]}", file=sys.stderr)
        return 2
    differences = 0
    for rel in sorted(set(before) | set(after)):
        if rel not in before or rel not in after:
            print(f"{rel}: only in {'after' if rel in after else 'before'}")
            differences += 1
            continue
        out, measured = [], []
        walk(json.loads(before[rel].read_text()), json.loads(after[rel].read_text()), "", out, measured)
        for p, x, y in out:
            print(f"{rel}: {p}: {json.dumps(x)} != {json.dumps(y)}")
        if show:
            for p, x, y in measured:
                print(f"{rel}: (measured) {p}: {json.dumps(x)} -> {json.dumps(y)}")
        differences += len(out)
    print(f"{len(before)} result files compared, {differences} figure(s) differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

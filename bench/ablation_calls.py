#!/usr/bin/env python3
"""Per-purpose model calls of kope runs: count x mean prompt / completion tokens per purpose
(draft, refine, repair, reflect), how the refinements answered (whole kernel or edits), and the
run's total tokens, from each run directory's llm-calls.jsonl and events.jsonl.

Usage: python3 bench/ablation_calls.py RUN_DIR [RUN_DIR...]
"""
import json, sys, collections, os
for run in sys.argv[1:]:
    purpose = {}
    stats = collections.defaultdict(lambda: [0, 0, 0])
    for l in open(os.path.join(run, 'llm-calls.jsonl')):
        d = json.loads(l)
        if d['event'] == 'request':
            purpose[d['call']] = d.get('purpose', '?')
        elif d['event'] == 'response' and 'usage' in d:
            s = stats[purpose.get(d['call'], '?')]
            s[0] += 1; s[1] += d['usage']['prompt']; s[2] += d['usage']['completion']
    forms = collections.Counter()
    for l in open(os.path.join(run, 'events.jsonl')):
        e = json.loads(l)
        if e.get('type') == 'attempt':
            a = e['attempt']
            if a.get('stage') == 'refine': forms[a.get('answer_form') or 'none'] += 1
    parts = [f"{p} {n} x {pt/n:,.0f} / {ct/n:,.0f}" for p, (n, pt, ct) in sorted(stats.items())]
    tot = sum(s[1] + s[2] for s in stats.values())
    print(f"{os.path.basename(run)}: " + "; ".join(parts) + f"; refine answers {dict(forms)}; total {tot:,}")

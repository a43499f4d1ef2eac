import json, sys, math
# table.py rows.json : list of [suite, variant, spec, grpo_spec, anchor_spec]
def load(spec):
    path, _, mode = spec.partition(':')
    d = json.load(open(path))
    return {r['seed']: r for r in d['runs'] if not mode or r['mode'] == mode}
def paired(o, b):
    seeds = sorted(set(o) & set(b))
    diffs = [o[s]['heldout_score'] - b[s]['heldout_score'] for s in seeds]
    n = len(diffs); m = sum(diffs)/n
    se = math.sqrt(sum((x-m)**2 for x in diffs)/(n-1)/n) if n > 1 else float('nan')
    return m, se, n
rows = json.load(open(sys.argv[1]))
print("| suite | variant | seeds | held-out | vs grpo | vs anchor | CPU-s (grpo's) | CPU-s per execution (grpo's) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for suite, var, spec, gs, an in rows:
    o, g, a = load(spec), load(gs), load(an)
    seeds = sorted(o)
    h = sum(o[s]['heldout_score'] for s in seeds)/len(seeds)
    cpu = sum(o[s]['sandbox_cpu_seconds'] for s in seeds)/len(seeds)
    ex = sum(o[s]['executions'] for s in seeds)
    gcpu = sum(g[s]['sandbox_cpu_seconds'] for s in g)/len(g)
    gex = sum(g[s]['executions'] for s in g)
    mg, sg, ng = paired(o, g)
    ma, sa, na = paired(o, a)
    vg = "–" if spec == gs else f"{mg:+.4f} ± {sg:.4f}"
    va = "–" if spec == an else f"{ma:+.4f} ± {sa:.4f}"
    print(f"| {suite} | {var} | {len(seeds)} | {h:.4f} | {vg} | {va} | {cpu:.1f} ({gcpu:.1f}) | {cpu*len(seeds)/ex:.3f} ({gcpu*len(g)/gex:.3f}) |")
